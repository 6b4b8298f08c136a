// Package scenario is the catalog of classic split-brains, each a scripted
// fault schedule and the workload settings that put a lock in the
// situation, with its lesson and the verdicts it should give: the incident
// on demand, in seconds, where a random schedule finds it by chance.
//
// This package holds the scenarios of every lock (Generic) and the types a
// backend's own scenarios are written with (backend/registry assembles the
// whole catalog: the generic ones and each backend's, in Topic order).
package scenario

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/resource"
)

// Scenario is one classic split-brain.
type Scenario struct {
	Name string
	// Summary is one line for the catalog.
	Summary string
	// Topic places it in the catalog (see Topic).
	Topic Topic
	// Backend names the backend whose scenario it is ("" for a scenario of
	// every lock): the catalog sets it.
	Backend string
	// Refs are the upstream bug reports it reproduces ("etcd#11456"),
	// shown after the summary.
	Refs []string
	// Lesson is what it teaches, in two or three sentences.
	Lesson string
	// Flags are run flags the scenario sets unless the command line does
	// (think times, run time, recipe, workload, guard).
	Flags map[string]string
	// Expect are the verdicts it should give, by resource mode (unfenced,
	// fenced) and check.
	Expect map[string]map[string]string
	// ByRecipe overrides Expect for the recipes named, whatever the
	// resource: a scenario that shows a lock bug expects it of the recipes
	// that have it.
	ByRecipe map[string]map[string]string
	// Faults script the schedule for a run of this shape.
	Faults func(s Shape) []nemesis.Entry
}

// Topic is what a scenario is about; the catalog lists scenarios by topic,
// in this order, and within one the scenarios of every lock first, then
// each backend's, in the registry's order.
type Topic int

// The topics.
const (
	// Fencing: a holder outlives its claim (a pause, a partition, a
	// revoked lease, a slow network, a slow clock) and writes late.
	Fencing Topic = iota
	// Release: a release that deletes whoever holds the lock (the
	// flash sale).
	Release
	// ServerLoss: the lock lives in a server's memory, which a failover,
	// a restart or a clock jump loses.
	ServerLoss
	// LockBugs: a lock that grants what it no longer holds.
	LockBugs
	// Keeps: what a lock service gets right.
	Keeps
)

// Extension is what a backend adds to a scenario of every lock: the
// verdicts its recipes give (ByRecipe), and the lesson and the upstream
// references they bring.
type Extension struct {
	Scenario string
	ByRecipe map[string]map[string]string
	Lesson   string
	Refs     []string
}

// Shape is what a schedule is scripted for.
type Shape struct {
	Members int
	Clients []string
	TTL     time.Duration
}

// Schedule is the scenario's fault schedule for a run of shape s.
func (sc Scenario) Schedule(seed int64, s Shape) nemesis.Schedule {
	return nemesis.Schedule{Seed: seed, Members: s.Members, Clients: slices.Clone(s.Clients), Entries: sc.Faults(s)}
}

// Line is the scenario's line in the catalog: its summary, and the bugs it
// reproduces.
func (sc Scenario) Line() string {
	if len(sc.Refs) == 0 {
		return sc.Summary
	}
	return sc.Summary + " (" + strings.Join(sc.Refs, ", ") + ")"
}

// common are the settings of every scenario: a shorter quiet period than
// a random run's, since a scenario's faults are over early and its
// clients are few, and no slow sections but those it asks for.
var common = map[string]string{"quiet": "6s", "liveness-bound": "5s", "slow-share": "0"}

// Settings are the run flags the scenario sets unless the command line
// does.
func (sc Scenario) Settings() map[string]string {
	out := maps.Clone(common)
	maps.Copy(out, sc.Flags)
	return out
}

// Expected are the verdicts the scenario expects of recipe with resource
// mode res.
func (sc Scenario) Expected(recipe, res string) map[string]string {
	if e, ok := sc.ByRecipe[recipe]; ok {
		return maps.Clone(e)
	}
	return maps.Clone(sc.Expect[res])
}

// Catalog is a list of scenarios, in the order the list prints them.
type Catalog []Scenario

// NewCatalog assembles the catalog: the scenarios of every lock and each
// backend's (by backend name, in order), ordered by Topic (stably: every
// lock's first, then the backends' in order), and extended by the
// backends' extensions.
func NewCatalog(generic []Scenario, backends []string, contributed [][]Scenario, ext []Extension) (Catalog, error) {
	c := slices.Clone(generic)
	for i, scs := range contributed {
		for _, sc := range scs {
			sc.Backend = backends[i]
			c = append(c, sc)
		}
	}
	slices.SortStableFunc(c, func(a, b Scenario) int { return int(a.Topic) - int(b.Topic) })
	for _, e := range ext {
		i := slices.IndexFunc(c, func(sc Scenario) bool { return sc.Name == e.Scenario })
		if i < 0 {
			return nil, fmt.Errorf("scenario: an extension of %q, which the catalog does not have", e.Scenario)
		}
		sc := &c[i]
		if len(e.ByRecipe) > 0 {
			sc.ByRecipe = maps.Clone(sc.ByRecipe)
			if sc.ByRecipe == nil {
				sc.ByRecipe = map[string]map[string]string{}
			}
			maps.Copy(sc.ByRecipe, e.ByRecipe)
		}
		if e.Lesson != "" {
			sc.Lesson += " " + e.Lesson
		}
		sc.Refs = append(slices.Clone(sc.Refs), e.Refs...)
	}
	seen := map[string]bool{}
	for _, sc := range c {
		if seen[sc.Name] {
			return nil, fmt.Errorf("scenario: two scenarios called %q", sc.Name)
		}
		seen[sc.Name] = true
	}
	return c, nil
}

// Lookup returns the scenario called name.
func (c Catalog) Lookup(name string) (Scenario, error) {
	for _, sc := range c {
		if sc.Name == name {
			return sc, nil
		}
	}
	return Scenario{}, fmt.Errorf("unknown scenario %q (want one of %s)", name, strings.Join(c.Names(), ", "))
}

// Names lists the catalog's names.
func (c Catalog) Names() []string {
	var out []string
	for _, sc := range c {
		out = append(out, sc.Name)
	}
	return out
}

// Holder strikes the client granted the lock next (waiting for a fresh
// grant, so that it has its section ahead of it), else fallback c0.
func Holder(e nemesis.Entry) nemesis.Entry {
	e.Target, e.Fallback = nemesis.TargetHolder, "c0"
	if e.Params == nil {
		e.Params = map[string]string{}
	}
	e.Params["on"] = "grant"
	return e
}

// PauseHolderBeforeWrite pauses the holder between its last check and its
// write, for longer than its lease.
func PauseHolderBeforeWrite(s Shape) []nemesis.Entry {
	return []nemesis.Entry{Holder(nemesis.Entry{At: time.Second, Fault: nemesis.PauseClient, Duration: 2*s.TTL + time.Second,
		Params: map[string]string{"before_write": "true"}})}
}

// The resource modes and verdicts, as expectations name them.
const (
	Unfenced = string(resource.Unfenced)
	Fenced   = string(resource.Fenced)
	Valid    = string(checker.Valid)
	Invalid  = string(checker.Invalid)
)

// Damage is the expectation of a scenario that shows what fencing is for:
// the unfenced resource is damaged, the fenced one is not.
var Damage = map[string]map[string]string{
	Unfenced: {histories.CheckResource: Invalid},
	Fenced:   {histories.CheckResource: Valid, histories.CheckInvariant: Valid},
}

// Generic are the scenarios of every lock.
var Generic = []Scenario{
	{
		Name:    "paused-holder",
		Summary: "the holder stops (a GC pause) between its read and its write, longer than its lease",
		Topic:   Fencing,
		Lesson: "A pause can strike between any check a holder makes and its write: its lease expires while it is stopped, " +
			"another client takes the lock and writes, and the first wakes up and writes too. No check in the client " +
			"helps; a fencing token checked by the resource rejects the late write.",
		Flags:  map[string]string{"time": "8s"},
		Expect: Damage,
		Faults: PauseHolderBeforeWrite,
	},
	{
		Name:    "partitioned-holder",
		Summary: "the holder's links to the cluster are cut mid-section; its lease expires; it keeps working",
		Topic:   Fencing,
		Lesson: "A holder cut off from the cluster cannot renew its lease, and cannot learn that it has lost it: the server " +
			"expires the lease and grants the lock to another client while the first goes on with its critical section " +
			"and writes. Fencing rejects that write.",
		Flags:  map[string]string{"time": "6s", "think": "2500ms", "think-min": "2500ms", "clients": "3"},
		Expect: Damage,
		Faults: func(s Shape) []nemesis.Entry {
			return []nemesis.Entry{Holder(nemesis.Entry{At: 2 * time.Second, Fault: nemesis.Isolate, Duration: 2*s.TTL + 2*time.Second})}
		},
	},
	{
		Name:    "lease-revoked",
		Summary: "an operator (or a lease bug) revokes the holder's lease mid-section",
		Topic:   Fencing,
		Lesson: "The lease is the lock: when it is revoked, the key goes with it and the next client is granted the lock at " +
			"once, while the holder is still in its critical section. The holder learns of it only at its next keepalive; " +
			"its write lands after the new holder's. Fencing rejects it.",
		Flags:  map[string]string{"time": "5s", "think": "2s", "think-min": "2s", "clients": "3"},
		Expect: Damage,
		Faults: func(Shape) []nemesis.Entry {
			return []nemesis.Entry{Holder(nemesis.Entry{At: 2 * time.Second, Fault: nemesis.LeaseRevoke})}
		},
	},
	{
		Name:    "delayed-write",
		Summary: "the holder's write to the resource is delayed on the network past its lease and the next holder's write",
		Topic:   Fencing,
		Lesson: "A write in flight is not a write done: the network holds the holder's write, and its lease renewals with it; " +
			"the lease runs out, another client takes the lock and writes, and then the old write arrives and is " +
			"accepted. Only the resource, which sees the token with the write, can tell it is stale.",
		// Its keepalives are held too: the lease runs out while the write is
		// in flight, and the client waits for the write.
		Flags:  map[string]string{"time": "6s", "think": "500ms", "think-min": "300ms"},
		Expect: Damage,
		Faults: func(s Shape) []nemesis.Entry {
			return []nemesis.Entry{Holder(nemesis.Entry{At: time.Second, Fault: nemesis.Slow, Duration: 5 * time.Second,
				Params: map[string]string{"link": "all", "toxic": "latency", "latency": (s.TTL + time.Second).String(), "jitter": "0s"}})}
		},
	},
	{
		Name:    "clock-guard",
		Summary: "the holder checks its lease on its own clock before writing; its clock runs slow; the check passes after the lease is gone",
		Topic:   Fencing,
		Lesson: "Checking the lease's time left on the client's own clock assumes that clock keeps time. A clock running slow " +
			"says the lease has time left after the server has expired it and granted the lock to another client; the " +
			"check passes and the write goes through. Fencing does not depend on any clock.",
		// The section (1.4 s on the holder's clock, under the guard's 1.6 s)
		// spans the drift (2.5 TTL of host time, a quarter of that on its
		// clock): its renewals come too late for the lease, and its write
		// lands after the next holder's, before the final heal steps its
		// clock back.
		Flags:  map[string]string{"time": "8s", "guard": "clock", "think": "1400ms", "think-min": "1400ms", "clients": "3"},
		Expect: Damage,
		Faults: func(s Shape) []nemesis.Entry {
			return []nemesis.Entry{Holder(nemesis.Entry{At: 500 * time.Millisecond, Fault: nemesis.ClockRate, Duration: 5 * s.TTL / 2,
				Params: map[string]string{"rate": "0.25"}})}
		},
	},
	{
		Name:    "waiter-expiry",
		Summary: "a queued waiter's lease expires while it waits",
		Topic:   LockBugs,
		Lesson: "A waiter whose session lease expires while it is queued must not be granted the lock: its key is gone, and " +
			"the next waiter may be granted it too. The contract check names it.",
		Flags: map[string]string{"time": "8s", "think": "300ms", "think-min": "200ms", "require": "contract"},
		Expect: map[string]map[string]string{
			Unfenced: {histories.CheckContract: Valid},
			Fenced:   {histories.CheckContract: Valid},
		},
		Faults: func(s Shape) []nemesis.Entry {
			return []nemesis.Entry{{At: time.Second, Fault: nemesis.LeaseStarve, Target: nemesis.TargetWaiter, Fallback: "c1",
				Duration: 2*s.TTL + 2*time.Second}}
		},
	},
}
