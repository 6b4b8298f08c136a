package nemesis

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Target selectors resolved when a fault fires. Other targets name a member
// ("m1") or a client ("c2") directly.
const (
	TargetHolder = "holder" // the client holding a lock then (else Entry.Fallback)
	TargetWaiter = "waiter" // the client waiting longest in Acquire then (else Entry.Fallback)
	TargetLeader = "leader" // the leader then (else Entry.Fallback)
)

// Entry is one fault of a Schedule: what was drawn from the seed. Targets
// given by selector ("holder", "leader") are resolved when it fires; the
// history records what they resolved to.
type Entry struct {
	// At is when the fault starts, from the start of Run. A fault never
	// starts before the previous one has stopped, so with slow stops it
	// may start later.
	At    time.Duration `json:"at_ns"`
	Fault string        `json:"fault"`
	// Target is a selector ("holder", "leader"), a member ("m1") or a
	// client ("c2"); empty for faults whose targets are in Groups.
	Target string `json:"target,omitempty"`
	// Fallback is the member or client used when Target's selector finds
	// nobody (no client holds a lock, no agreed leader).
	Fallback string `json:"fallback,omitempty"`
	// Duration is how long the fault lasts (for lease-starve: the longest it
	// waits for the lease to expire). Zero for instantaneous faults
	// (lease-revoke, crash-client).
	Duration time.Duration `json:"duration_ns"`
	// Groups are member indices for partitions: for partition-majority
	// [minority, majority]; for partition-bridge [side, bridge, side]; for
	// partition-majorities-ring one list, the ring order, in which each
	// member sees its nearest neighbours.
	Groups [][]int `json:"groups,omitempty"`
	// Sides place clients in a partition: the index of the client's group
	// (partition-one and partition-leader: 0 with the isolated member, 1
	// with the rest), or for the ring the client's position in the ring. A
	// client reaches the members its side's members reach.
	Sides map[string]int `json:"sides,omitempty"`
	// Params are fault parameters, recorded in the history as they are.
	// Partitions: links=refuse (a client's links to members it does not
	// reach refuse connections; the default) or links=drop (they silently
	// drop data).
	Params map[string]string `json:"params,omitempty"`
}

// Schedule is a sequence of faults, generated from a seed or read from a
// file.
type Schedule struct {
	Seed    int64    `json:"seed"`
	Members int      `json:"members"`
	Clients []string `json:"clients"`
	Entries []Entry  `json:"entries"`
}

// Generate draws a schedule from seed: a pure function of seed and cfg
// (its Faults, Interval, Time, Members, Clients and duration ranges). Each
// fault starts Interval after the previous one's drawn end; the category is
// drawn uniformly from cfg.Faults, then the kind within it. Targets favour
// the lock holder and the leader.
func Generate(seed int64, cfg Config) (Schedule, error) {
	cfg = cfg.WithDefaults()
	s := Schedule{Seed: seed, Members: cfg.Members, Clients: slices.Clone(cfg.Clients)}
	if s.Clients == nil {
		s.Clients = []string{}
	}
	for _, f := range cfg.Faults {
		if categoryKinds[f] == nil {
			return s, fmt.Errorf("nemesis: unknown fault %q", f)
		}
	}
	if cfg.Members < 1 {
		return s, fmt.Errorf("nemesis: %d members", cfg.Members)
	}
	var cats []string
	for _, c := range Categories {
		if slices.Contains(cfg.Faults, c) && len(Kinds(c, cfg.Members)) > 0 {
			if len(cfg.Clients) == 0 && c != "partition" && c != "crash" {
				continue // needs clients
			}
			cats = append(cats, c)
		}
	}
	s.Entries = []Entry{}
	if len(cats) == 0 {
		return s, nil
	}
	g := &gen{rng: rand.New(rand.NewPCG(uint64(seed), 0x6e656d65736973)), cfg: cfg}
	for at := cfg.Interval; at < cfg.Time; {
		c := cats[g.rng.IntN(len(cats))]
		ks := Kinds(c, cfg.Members)
		if len(cfg.Clients) == 0 {
			ks = slices.DeleteFunc(slices.Clone(ks), func(k string) bool { return k == CrashClient })
		}
		e := g.entry(ks[g.rng.IntN(len(ks))])
		e.At = at
		s.Entries = append(s.Entries, e)
		at += e.Duration + cfg.Interval
	}
	return s, nil
}

type gen struct {
	rng *rand.Rand
	cfg Config
}

func (g *gen) dur(r Range) time.Duration {
	if r.Max <= r.Min {
		return r.Min
	}
	// Whole milliseconds keep the schedule readable.
	ms := int64(r.Min/time.Millisecond) + g.rng.Int64N(int64((r.Max-r.Min)/time.Millisecond)+1)
	return time.Duration(ms) * time.Millisecond
}

func (g *gen) between(lo, hi time.Duration) time.Duration { return g.dur(Range{lo, hi}) }

func (g *gen) chance(p float64) bool { return g.rng.Float64() < p }

func (g *gen) client() string { return g.cfg.Clients[g.rng.IntN(len(g.cfg.Clients))] }

func (g *gen) member() string { return "m" + strconv.Itoa(g.rng.IntN(g.cfg.Members)) }

// clientTarget favours the holder with probability p.
func (g *gen) clientTarget(e *Entry, p float64) { g.roleTarget(e, p, 0) }

// roleTarget strikes the holder with probability holder, a waiter (a
// client queued in Acquire, where lock bugs such as etcd#11456 live) with
// probability waiter, and otherwise a client drawn now. One draw decides,
// as clientTarget's did, so other entries of a schedule keep their draws.
func (g *gen) roleTarget(e *Entry, holder, waiter float64) {
	e.Fallback = g.client()
	switch u := g.rng.Float64(); {
	case u < holder:
		e.Target = TargetHolder
	case u < holder+waiter:
		e.Target = TargetWaiter
	default:
		e.Target, e.Fallback = e.Fallback, ""
	}
}

// sides places every client in one of n groups.
func (g *gen) sides(n int) map[string]int {
	m := map[string]int{}
	for _, c := range g.cfg.Clients {
		m[c] = g.rng.IntN(n)
	}
	return m
}

func (g *gen) entry(kind string) Entry {
	e := Entry{Fault: kind, Params: map[string]string{}}
	n := g.cfg.Members
	switch kind {
	case PartitionOne:
		e.Target = g.member()
		e.Duration = g.dur(g.cfg.Partition)
		e.Sides = g.sides(2)
	case PartitionLeader:
		e.Target, e.Fallback = TargetLeader, g.member()
		e.Duration = g.dur(g.cfg.Partition)
		e.Sides = g.sides(2)
	case PartitionMajority:
		p := g.rng.Perm(n)
		e.Groups = [][]int{sorted(p[:n/2]), sorted(p[n/2:])}
		e.Duration = g.dur(g.cfg.Partition)
		e.Sides = g.sides(2)
	case PartitionMajoritiesRing:
		e.Groups = [][]int{g.rng.Perm(n)}
		e.Duration = g.dur(g.cfg.Partition)
		e.Sides = g.sides(n)
	case PartitionBridge:
		p := g.rng.Perm(n)
		h := (n - 1) / 2
		e.Groups = [][]int{sorted(p[:h]), {p[h]}, sorted(p[h+1:])}
		e.Duration = g.dur(g.cfg.Partition)
		e.Sides = g.sides(3)
	case Isolate:
		g.roleTarget(&e, 0.6, 0.25)
		e.Duration = g.dur(g.cfg.Isolate)
	case LeaseStarve:
		g.roleTarget(&e, 0.7, 0.3)
		e.Duration = g.dur(g.cfg.Lease)
	case LeaseRevoke:
		g.roleTarget(&e, 0.7, 0.3)
	// Clock faults favour the holder and the slow direction: a holder whose
	// clock falls behind renews its lease late and trusts it too long.
	case ClockBump:
		g.clientTarget(&e, 0.8)
		d := g.between(200*time.Millisecond, 2*g.cfg.TTL+time.Second)
		if g.chance(0.75) {
			d = -d
		}
		e.Params["delta"] = d.String()
		e.Duration = g.dur(g.cfg.Clock)
	case ClockStrobe:
		g.clientTarget(&e, 0.8)
		e.Params["delta"] = g.between(200*time.Millisecond, 2*g.cfg.TTL).String()
		e.Params["period"] = g.between(10*time.Millisecond, 200*time.Millisecond).String()
		e.Duration = g.dur(g.cfg.Clock)
	case ClockRate:
		g.clientTarget(&e, 0.8)
		rates := []string{"0.1", "0.2", "0.25", "0.5", "0.75", "1.5", "2"}
		e.Params["rate"] = rates[g.rng.IntN(len(rates))]
		e.Duration = g.dur(g.cfg.Clock)
	case PauseClient:
		g.roleTarget(&e, 0.6, 0.25)
		e.Params["before_write"] = strconv.FormatBool(e.Target == TargetHolder && g.chance(0.7))
		e.Duration = g.dur(g.cfg.Pause)
	case PauseMember:
		e.Target = g.member()
		if g.chance(0.5) {
			e.Target, e.Fallback = TargetLeader, e.Target
		}
		e.Duration = g.dur(g.cfg.Pause)
	case CrashMember:
		e.Target = g.member()
		e.Duration = g.dur(g.cfg.Crash)
	case CrashLeader:
		e.Target, e.Fallback = TargetLeader, g.member()
		e.Duration = g.dur(g.cfg.Crash)
	case CrashClient:
		g.clientTarget(&e, 0.7)
	case Slow:
		g.clientTarget(&e, 0.6)
		links := []string{"etcd", "resource", "all"}
		e.Params["link"] = links[g.rng.IntN(len(links))]
		switch g.rng.IntN(3) {
		case 0, 1:
			e.Params["toxic"] = "latency"
			// Up to past the TTL: a write to the resource held that long
			// lands after the writer's lease expired.
			e.Params["latency"] = g.between(20*time.Millisecond, g.cfg.TTL+time.Second).String()
			e.Params["jitter"] = g.between(0, 200*time.Millisecond).String()
		case 2:
			if g.chance(0.5) {
				e.Params["toxic"] = "bandwidth"
				e.Params["rate_kb"] = strconv.Itoa(1 + g.rng.IntN(32))
			} else {
				e.Params["toxic"] = "reset"
				e.Params["after"] = g.between(0, 500*time.Millisecond).String()
			}
		}
		e.Duration = g.dur(g.cfg.Slow)
	}
	if strings.HasPrefix(kind, "partition-") {
		e.Params["links"] = []string{"refuse", "drop"}[g.rng.IntN(2)]
	}
	if len(e.Params) == 0 {
		e.Params = nil
	}
	return e
}

func sorted(xs []int) []int {
	ys := slices.Clone(xs)
	slices.Sort(ys)
	return ys
}

// Validate checks that every entry is well-formed for the schedule's
// cluster size.
func (s Schedule) Validate() error {
	if s.Members < 1 {
		return fmt.Errorf("nemesis: schedule for %d members", s.Members)
	}
	var errs []error
	for i, e := range s.Entries {
		if err := e.validate(s.Members); err != nil {
			errs = append(errs, fmt.Errorf("nemesis: schedule entry %d (%s): %w", i, e.Fault, err))
		}
	}
	return errors.Join(errs...)
}

func (e Entry) validate(n int) error {
	if !knownKind(e.Fault) {
		return errors.New("unknown fault kind")
	}
	if e.At < 0 || e.Duration < 0 {
		return errors.New("negative time")
	}
	seen := map[int]bool{}
	for _, g := range e.Groups {
		for _, m := range g {
			if m < 0 || m >= n || seen[m] {
				return fmt.Errorf("bad member %d in groups", m)
			}
			seen[m] = true
		}
	}
	switch e.Fault {
	case PartitionMajority:
		if len(e.Groups) != 2 {
			return errors.New("want 2 groups")
		}
	case PartitionBridge:
		if len(e.Groups) != 3 || len(e.Groups[1]) != 1 {
			return errors.New("want 3 groups, the middle one a single member")
		}
	case PartitionMajoritiesRing:
		if len(e.Groups) != 1 || len(e.Groups[0]) != n {
			return errors.New("want one group holding every member in ring order")
		}
	case PartitionOne, PartitionLeader, Isolate, LeaseStarve, LeaseRevoke, ClockBump, ClockStrobe, ClockRate,
		PauseClient, PauseMember, CrashMember, CrashLeader, CrashClient, Slow:
		if e.Target == "" {
			return errors.New("no target")
		}
	}
	for _, k := range []string{"delta", "period", "latency", "jitter", "after"} {
		if v, ok := e.Params[k]; ok {
			if _, err := time.ParseDuration(v); err != nil {
				return fmt.Errorf("param %s: %w", k, err)
			}
		}
	}
	for _, k := range []string{"rate", "rate_kb"} {
		if v, ok := e.Params[k]; ok {
			if _, err := strconv.ParseFloat(v, 64); err != nil {
				return fmt.Errorf("param %s: %w", k, err)
			}
		}
	}
	return nil
}

// WriteFile writes the schedule as indented JSON.
func (s Schedule) WriteFile(path string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadFile reads a schedule written by WriteFile and validates it.
func ReadFile(path string) (Schedule, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Schedule{}, err
	}
	var s Schedule
	if err := json.Unmarshal(b, &s); err != nil {
		return Schedule{}, fmt.Errorf("nemesis: schedule %s: %w", path, err)
	}
	if err := s.Validate(); err != nil {
		return Schedule{}, fmt.Errorf("nemesis: schedule %s: %w", path, err)
	}
	return s, nil
}
