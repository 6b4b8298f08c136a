// Package nemesis injects faults into a running locktest. A fault family
// (fault.go: the Family interface and the registry) is one file; the
// families are listed in docs/reference/faults.md, which `locktest docs`
// writes from the registry. Each says which kinds it has, what it
// needs of the system under test (package system's capabilities: a family names no
// backend, and strikes every system that offers what it needs), how it
// draws an entry from the seed, how it injects, stops and heals, and how a
// story words it. Faults run one at a time from a Schedule (schedule.go), which
// Generate draws from a seed; Run (run.go) records every fault's start and
// stop in the history as an operation of the "nemesis" process, and ends by
// healing everything.
package nemesis

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/words"
)

// Clients is what the nemesis needs from the running workload.
type Clients interface {
	Names() []string                                                  // "c0", "c1", ...
	Holder(key string) (client string, token int64, ok bool)          // the client that currently believes it holds lock key ("" key = any lock), and its token
	Pause(client string, d time.Duration, beforeWrite bool) error     // stop-the-world pause of d; if beforeWrite, armed to hit between the client's guard check and its write (the call returns once armed/started; the client resumes by itself after d)
	BumpClock(client string, d time.Duration)                         // jump the client's clock by d
	SetClockRate(client string, rate float64)                         // 1.0 normal, 0.5 runs slow
	ResetClock(client string)                                         // offset 0, rate 1
	Crash(client string) error                                        // drop the client's session without closing it; it continues as a new process with a new session
	Lease(client string) (id string, ok bool)                         // the client's current session lease, in hex
	Waiter(minWait time.Duration) (client string, ok bool)            // the client longest in Acquire, if it has waited at least minWait
	Newest(minWait time.Duration) (client string, ok bool)            // the client that began its Acquire last of those that have waited at least minWait
	Entering(min, max, within time.Duration) (client string, ok bool) // a holder that began, within the last within, a section thinking between min and max (max 0: no bound) on its clock
	Ahead(min time.Duration) (client string, ok bool)                 // a holder whose section has at least min of its think time left
	Role(client string) string                                        // "holder", "waiter" or "idle" now
	Disarm(client string) (armed bool, pausedUntil time.Time)         // cancel a pause armed for the client's next write; when its current pause ends (zero: not paused)
	// Intercept arms a hook on the client's next operation op
	// (histories.Acquire or Release; SectionEnd: the end of a holder's
	// section, before its release), or the one in flight: before runs
	// just before the client sends it (at once for one in flight), and
	// after, with its error, once it returned, before the client goes on;
	// cancel disarms it unless before has run, and says whether it had.
	Intercept(client, op string, before func(), after func(error)) (cancel func() (fired bool), err error)
}

// Recorder appends operations to the history; *histories.Recorder is one.
type Recorder interface {
	Record(op histories.Op) (histories.Op, error)
}

// All, as --nemesis, is every family the system under test can carry out
// (see Expand).
const All = "all"

// ParseFaults parses --nemesis: a comma list of families (Categories), or
// "all" ([All], which Expand resolves once the system is known), or "none"
// (or the empty string). It returns the families in canonical order,
// without duplicates; none gives an empty list.
func ParseFaults(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "none" {
		return []string{}, nil
	}
	if s == All {
		return []string{All}, nil
	}

	seen := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == All || f == "none":
			return nil, fmt.Errorf("%q cannot be combined with other faults", f)
		case f == "":
			return nil, fmt.Errorf("empty fault name in %q", s)
		default:
			if _, ok := family(f); !ok {
				return nil, fmt.Errorf("unknown fault %q%s (want a comma list of %s, or all, or none)", f, words.DidYouMean(f, append(Categories(), All, "none")), strings.Join(Categories(), ", "))
			}
		}
		seen[f] = true
	}
	var out []string
	for _, c := range Categories() {
		if seen[c] {
			out = append(out, c)
		}
	}
	return out, nil
}

// Expand resolves All in faults: every family of which offers holds some
// kind (nil: every family), but for those a run must ask for by name
// (failover changes the servers a run starts; the emulated clock jump is an
// emulation, not a clock fault). Other lists are returned as they are.
func Expand(faults []string, offers []string) []string {
	if !slices.Equal(faults, []string{All}) {
		return faults
	}
	out := []string{}
	for _, f := range families {
		if f.Spec().ByNameOnly {
			continue
		}
		if offersSome(offers, f) {
			out = append(out, f.Spec().Name)
		}
	}
	return out
}

// Offering keeps the families of faults of which a system offers some
// kind (offers, as Offered says; nil: every kind); "all" is kept.
func Offering(faults []string, offers []string) []string {
	out := []string{}
	for _, name := range faults {
		f, ok := family(name)
		if !ok || offersSome(offers, f) {
			out = append(out, name)
		}
	}
	return out
}

// offersSome says whether offers (nil: every kind) holds a kind of f.
func offersSome(offers []string, f Family) bool {
	return offers == nil || slices.ContainsFunc(everyKind(f), func(k string) bool { return slices.Contains(offers, k) })
}

// ParseDurations reads --fault-durations, "pause=3s-5s,partition=2s", into
// ranges by family; a single duration is a range of one.
func ParseDurations(s string) (map[string]Range, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]Range{}
	for _, item := range strings.Split(s, ",") {
		name, span, ok := strings.Cut(strings.TrimSpace(item), "=")
		if _, known := family(name); !ok || !known {
			return nil, fmt.Errorf("%q: want FAULT=MIN-MAX with FAULT one of %s", item, strings.Join(Categories(), ", "))
		}
		lo, hi, isRange := strings.Cut(span, "-")
		if !isRange {
			hi = lo
		}
		min, err1 := time.ParseDuration(lo)
		max, err2 := time.ParseDuration(hi)
		if err1 != nil || err2 != nil || min <= 0 || max < min {
			return nil, fmt.Errorf("%q: want a duration or MIN-MAX with 0 < MIN <= MAX", item)
		}
		out[name] = Range{Min: min, Max: max}
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
	// Interval is the quiet time before each fault (default DefaultInterval).
	Interval time.Duration `json:"interval_ns"`
	// Time is how long a stretch Generate fills with faults: no fault starts
	// at or after it (default 60 s). Run itself lasts until its context
	// ends.
	Time time.Duration `json:"time_ns"`
	// Members is the cluster size (default 3).
	Members int `json:"members"`
	// MemberNames name the members a fault may strike, when they are not
	// "m0", "m1", ... (a backend names its servers: "r0", "r1", ...).
	MemberNames []string `json:"member_names,omitempty"`
	// MemberLinks is what a slow fault's param link calls the clients'
	// links to the members (the backend's name; "members" if empty).
	MemberLinks string `json:"-"`
	// Clients are the workload's client names ("c0", ...); Generate draws
	// client targets and sides from them.
	Clients []string `json:"clients"`
	// Quorum, when set, is how many members a grant takes, each member
	// holding its own copy of the lock (Redlock: a majority of independent
	// masters). Crashes and clock jumps of a member then often strike a
	// holder granted on a bare quorum, as the published Redlock
	// counterexamples do (see Gen.bareQuorum).
	Quorum int `json:"quorum,omitempty"`
	// TTL is the clients' session lease TTL (default 2 s). Some defaults
	// derive from it.
	TTL time.Duration `json:"ttl_ns"`
	// OpTimeout is the clients' operation timeout (0: not known): the
	// stop of a lost acquire reply waits for the acquire's answer up to it.
	OpTimeout time.Duration `json:"op_timeout_ns,omitempty"`
	// UntoldWaiters says the lock's waiters tell no lease (a lock in a
	// process of its own tells at most its grant's key), so that a lease
	// fault on a waiter is played as a pause (asPause): the waiter
	// opening is drawn as a pause, aimed as one.
	UntoldWaiters bool `json:"untold_waiters,omitempty"`

	// The mix (--nemesis-mix, swarm.go), all of it drawn from the seed:
	// Swarm has each schedule draw from a random subset of Faults; Aim
	// turns a share of its client faults on the moments where locks break
	// (aimAt); Dense waits a quarter of Interval before each fault and
	// draws families by their share of time (gap, Gen.family).
	Swarm bool `json:"swarm,omitempty"`
	Aim   bool `json:"aim,omitempty"`
	Dense bool `json:"dense,omitempty"`
	// Steer are cells the schedule's first faults are drawn to strike,
	// in order (steer.go): a nightly's random run steered toward cells
	// its earlier runs did not strike.
	Steer []Cell `json:"steer,omitempty"`

	// Durations are how long each family's faults last, by family name
	// (missing: the family's default). For lease, the longest a
	// lease-starve waits for the server to expire the lease; for crash, the
	// downtime of a crashed member.
	Durations map[string]Range `json:"durations"`

	// HealTimeout bounds stopping a fault and the final heal (default 30 s).
	HealTimeout time.Duration `json:"heal_timeout_ns"`

	// Logf, if set, receives a line per fault and problem.
	Logf func(format string, args ...any) `json:"-"`
	// Offers, if set, are the fault kinds the run can carry out: those
	// its system offers (Offered) that the lock under test can suffer.
	// Generate draws only those; nil is every kind.
	Offers []string `json:"-"`
}

// DefaultInterval is the quiet time before each fault.
const DefaultInterval = 2 * time.Second

// WithDefaults fills in zero fields.
func (c Config) WithDefaults() Config {
	if c.Interval == 0 {
		c.Interval = DefaultInterval
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
	durations := make(map[string]Range, len(families))
	for _, f := range families {
		spec := f.Spec()
		r, ok := c.Durations[spec.Name]
		if !ok || r.Min == 0 && r.Max == 0 {
			r = spec.Durations(c.TTL)
		}
		if r.Max < r.Min {
			r.Max = r.Min
		}
		durations[spec.Name] = r
	}
	c.Durations = durations
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
