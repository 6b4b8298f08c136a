// Package nemesis injects faults into a running locktest: partitions between
// etcd members (with the clients following them), isolated clients, expired
// or revoked leases, skewed client clocks, paused clients and members,
// crashed members and clients, and slow links. Faults run one at a time from
// a Schedule, which Generate draws from a seed; every fault's start and stop
// is recorded in the history as an operation of the "nemesis" process, and
// Run ends by healing everything.
package nemesis

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/histories"
)

// Clients is what the nemesis needs from the running workload.
type Clients interface {
	Names() []string                                              // "c0", "c1", ...
	Holder(key string) (client string, token int64, ok bool)      // the client that currently believes it holds lock key ("" key = any lock), and its token
	Pause(client string, d time.Duration, beforeWrite bool) error // stop-the-world pause of d; if beforeWrite, armed to hit between the client's guard check and its write (the call returns once armed/started; the client resumes by itself after d)
	BumpClock(client string, d time.Duration)                     // jump the client's clock by d
	SetClockRate(client string, rate float64)                     // 1.0 normal, 0.5 runs slow
	ResetClock(client string)                                     // offset 0, rate 1
	Crash(client string) error                                    // drop the client's session without closing it; it continues as a new process with a new session
	Lease(client string) (id string, ok bool)                     // the client's current session lease, in hex
	Waiter(minWait time.Duration) (client string, ok bool)        // the client longest in Acquire, if it has waited at least minWait
	Role(client string) string                                    // "holder", "waiter" or "idle" now
	Disarm(client string) (armed bool, pausedUntil time.Time)     // cancel a pause armed for the client's next write; when its current pause ends (zero: not paused)
}

// Recorder appends operations to the history; *histories.Recorder is one.
type Recorder interface {
	Record(op histories.Op) (histories.Op, error)
}

// Fault kinds, the value.fault of nemesis events.
const (
	PartitionOne            = "partition-one"
	PartitionLeader         = "partition-leader"
	PartitionMajority       = "partition-majority"
	PartitionMajoritiesRing = "partition-majorities-ring"
	PartitionBridge         = "partition-bridge"
	Isolate                 = "isolate"
	LeaseStarve             = "lease-starve"
	LeaseRevoke             = histories.FaultLeaseRevoke
	ClockBump               = "clock-bump"
	ClockStrobe             = "clock-strobe"
	ClockRate               = "clock-rate"
	PauseClient             = "pause-client"
	PauseMember             = "pause-member"
	CrashMember             = "crash-member"
	CrashLeader             = "crash-leader"
	CrashClient             = "crash-client"
	Slow                    = "slow"
)

// Categories are the names --nemesis accepts, in canonical order.
var Categories = []string{"partition", "isolate", "lease", "clock", "pause", "crash", "slow"}

// categoryKinds lists each category's kinds. Ring and bridge need at least
// five members (see Kinds).
var categoryKinds = map[string][]string{
	"partition": {PartitionOne, PartitionLeader, PartitionMajority, PartitionMajoritiesRing, PartitionBridge},
	"isolate":   {Isolate},
	"lease":     {LeaseStarve, LeaseRevoke},
	"clock":     {ClockBump, ClockStrobe, ClockRate},
	"pause":     {PauseClient, PauseMember},
	"crash":     {CrashMember, CrashLeader, CrashClient},
	"slow":      {Slow},
}

// Kinds returns the fault kinds of category that apply to a cluster of
// members members: the majorities ring and the bridge need five or more.
func Kinds(category string, members int) []string {
	var ks []string
	for _, k := range categoryKinds[category] {
		if (k == PartitionMajoritiesRing || k == PartitionBridge) && members < 5 {
			continue
		}
		ks = append(ks, k)
	}
	return ks
}

// AllKinds lists every fault kind.
func AllKinds() []string {
	var ks []string
	for _, c := range Categories {
		ks = append(ks, categoryKinds[c]...)
	}
	return ks
}

func knownKind(k string) bool { return slices.Contains(AllKinds(), k) }

// ParseFaults parses --nemesis: a comma list of categories (partition,
// isolate, lease, clock, pause, crash, slow), or "all", or "none" (or the
// empty string). It returns the categories in canonical order, without
// duplicates; none gives an empty list.
func ParseFaults(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "none" {
		return []string{}, nil
	}
	if s == "all" {
		return slices.Clone(Categories), nil
	}
	seen := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "all" || f == "none":
			return nil, fmt.Errorf("nemesis: %q cannot be combined with other faults", f)
		case f == "":
			return nil, fmt.Errorf("nemesis: empty fault name in %q", s)
		case categoryKinds[f] == nil:
			return nil, fmt.Errorf("nemesis: unknown fault %q (want a comma list of %s, or all, or none)", f, strings.Join(Categories, ", "))
		}
		seen[f] = true
	}
	var out []string
	for _, c := range Categories {
		if seen[c] {
			out = append(out, c)
		}
	}
	return out, nil
}

// Range is an interval of durations; values are drawn uniformly from it.
type Range struct {
	Min time.Duration `json:"min_ns"`
	Max time.Duration `json:"max_ns"`
}

// Config configures Generate and Run.
type Config struct {
	// Faults are the categories to draw from (see ParseFaults).
	Faults []string `json:"faults"`
	// Interval is the quiet time before each fault (default 3 s).
	Interval time.Duration `json:"interval_ns"`
	// Time is how long a stretch Generate fills with faults: no fault starts
	// at or after it (default 60 s). Run itself lasts until its context
	// ends.
	Time time.Duration `json:"time_ns"`
	// Members is the cluster size (default 3).
	Members int `json:"members"`
	// Clients are the workload's client names ("c0", ...); Generate draws
	// client targets and sides from them.
	Clients []string `json:"clients"`
	// TTL is the clients' session lease TTL (default 2 s). Some defaults
	// derive from it.
	TTL time.Duration `json:"ttl_ns"`

	// How long each kind of fault lasts. Lease is the longest a
	// lease-starve waits for the server to expire the lease; Crash is the
	// downtime of a crashed member.
	Partition Range `json:"partition"`
	Isolate   Range `json:"isolate"`
	Lease     Range `json:"lease"`
	Clock     Range `json:"clock"`
	Pause     Range `json:"pause"`
	Crash     Range `json:"crash"`
	Slow      Range `json:"slow"`

	// HealTimeout bounds stopping a fault and the final heal (default 30 s).
	HealTimeout time.Duration `json:"heal_timeout_ns"`

	// Logf, if set, receives a line per fault and problem.
	Logf func(format string, args ...any) `json:"-"`
}

// WithDefaults fills in zero fields.
func (c Config) WithDefaults() Config {
	if c.Interval == 0 {
		c.Interval = 3 * time.Second
	}
	if c.Time == 0 {
		c.Time = time.Minute
	}
	if c.Members == 0 {
		c.Members = 3
	}
	if c.TTL == 0 {
		c.TTL = 2 * time.Second
	}
	def := func(r *Range, min, max time.Duration) {
		if r.Min == 0 && r.Max == 0 {
			r.Min, r.Max = min, max
		}
		if r.Max < r.Min {
			r.Max = r.Min
		}
	}
	ttl := c.TTL
	def(&c.Partition, 2*time.Second, 4*time.Second)
	// An isolated holder matters once its lease has run out: outlast it.
	def(&c.Isolate, ttl+ttl/2, 2*ttl+2*time.Second)
	def(&c.Lease, ttl+2*time.Second, 2*ttl+2*time.Second)
	// A skewed clock matters over several lease periods: that long, a slow
	// holder's renewals fall behind while its own clock vouches for it.
	def(&c.Clock, 2*ttl, 5*ttl)
	// Pauses outlast the lease, so the holder wakes up with its lease gone.
	def(&c.Pause, ttl+ttl/4, 2*ttl)
	def(&c.Crash, 2*time.Second, 4*time.Second)
	def(&c.Slow, 2*time.Second, 4*time.Second)
	if c.HealTimeout == 0 {
		c.HealTimeout = 30 * time.Second
	}
	return c
}

func (c Config) logf(format string, args ...any) {
	if c.Logf != nil {
		c.Logf(format, args...)
	}
}
