package workload

import "time"

// Stats summarises what the clients did.
type Stats struct {
	Acquisitions int           `json:"acquisitions"`
	Operations   int           `json:"operations"`
	Unknown      int           `json:"unknown"`
	AcquireP50   time.Duration `json:"acquire_p50_ns"`
	AcquireP70   time.Duration `json:"acquire_p70_ns"`
	AcquireP90   time.Duration `json:"acquire_p90_ns"`
	AcquireP99   time.Duration `json:"acquire_p99_ns"`
	// GuardRefusals counts writes a client skipped because its guard
	// failed.
	GuardRefusals int `json:"guard_refusals"`
	// LeasesLost counts lease-lost events: a session ended under a lock its
	// client believed it held.
	LeasesLost int `json:"leases_lost"`
	// Crashes counts crashes that took effect.
	Crashes int `json:"crashes"`
	// Sales counts the stock workload's accepted writes (each a sale), and
	// SoldOut its critical sections that found no stock left.
	Sales        int `json:"sales,omitempty"`
	SoldOut      int `json:"sold_out,omitempty"`
	acquireWaits []time.Duration
}

func (s *Stats) add(o Stats) {
	s.Acquisitions += o.Acquisitions
	s.Operations += o.Operations
	s.Unknown += o.Unknown
	s.GuardRefusals += o.GuardRefusals
	s.LeasesLost += o.LeasesLost
	s.Crashes += o.Crashes
	s.Sales += o.Sales
	s.SoldOut += o.SoldOut
	s.acquireWaits = append(s.acquireWaits, o.acquireWaits...)
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(q*float64(len(sorted)-1))]
}
