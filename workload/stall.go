package workload

import (
	"strconv"
	"time"

	"github.com/locktest/locktest/histories"
)

// The stall watcher looks at the host's clock every stallTick and records
// a gap of stallMin or more beyond it.
const (
	stallTick = 20 * time.Millisecond
	stallMin  = 200 * time.Millisecond
)

// watchStalls records a stall event each time locktest's process did not
// run the watcher for stallMin or more beyond its tick (the host starved
// it of CPU, swapped it out or stopped it): its clients, in this process,
// could not renew their leases either, as under a pause nobody injected,
// and the contract check must not blame the lock for a lease that lapsed
// then. It returns when stop is closed.
func watchStalls(rec Recorder, stop <-chan struct{}) {
	t := time.NewTicker(stallTick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if gap := stalled(last, time.Now()); gap > 0 {
			rec.Record(stallEvent(gap))
		}
		// From after the record: a write that waited is no stall.
		last = time.Now()
	}
}

// stalled is how long the watcher did not run between two looks at the
// host's clock, if that is a stall (stallMin beyond the tick); else 0.
func stalled(last, now time.Time) time.Duration {
	if gap := now.Sub(last); gap >= stallTick+stallMin {
		return gap
	}
	return 0
}

func stallEvent(gap time.Duration) histories.Op {
	return histories.Op{Type: histories.Info, F: histories.FStall, Process: histories.Nemesis,
		Value: &histories.Value{Params: map[string]string{"duration_ns": strconv.FormatInt(int64(gap), 10)}}}
}
