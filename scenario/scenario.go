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
	"github.com/locktest/locktest/internal/shellwords"
	"github.com/locktest/locktest/internal/words"
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
	// Bugs are the upstream bugs it reproduces: the catalog marks it with
	// them, and results, the report and the JUnit case carry them.
	Bugs []Bug
	// Lesson is what it teaches, in two or three sentences.
	Lesson string
	// Run are the run settings the scenario needs (think times, run time,
	// recipe, workload, guard), over the common ones (Settings).
	Run Settings
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

// String is the topic as the reference heads its scenarios.
func (t Topic) String() string {
	switch t {
	case Fencing:
		return "A holder outlives its claim: what fencing is for"
	case Release:
		return "A release that deletes whoever holds the lock"
	case ServerLoss:
		return "The lock lives in a server's memory, which is lost"
	case LockBugs:
		return "A lock that grants what it no longer holds"
	case Keeps:
		return "What a lock service gets right"
	}
	return fmt.Sprintf("topic %d", int(t))
}

// Bug is an upstream bug a scenario reproduces.
type Bug struct {
	// Ref names the upstream report: "etcd#22082".
	Ref string `json:"ref"`
	// URL is where the report is.
	URL string `json:"url"`
	// Seen are the versions locktest reproduced it in: "etcd 3.6.16".
	Seen string `json:"seen"`
	// Fixed says whether it is fixed upstream; Status says how things
	// stand: "open; a fix is proposed in pull request 22115", "fixed in
	// 3.5".
	Fixed  bool   `json:"fixed"`
	Status string `json:"status"`
	// Recipes are the recipes of the scenario that show it (none: every
	// recipe it plays).
	Recipes []string `json:"recipes,omitempty"`
	// Shows are the kinds of violation its story is in the check it
	// breaks, as the checks name them (checker.Violation's Kind: "promise
	// 2", "ghost"). locktest power counts a run as catching it only when
	// one of them is found; none: any violation of that check.
	Shows []string `json:"shows,omitempty"`
	// Ecosystem is the code the bug is in: "etcd server", "Python:
	// redis-py".
	Ecosystem string `json:"ecosystem,omitempty"`
	// Affected are the upstream versions that have it, as far as
	// upstream says: "redis-py up to 7.0 (sync Lock)".
	Affected string `json:"affected,omitempty"`
	// Reproduced says when and how often the scenario last showed it
	// (and its contrast passed), by seeds of `locktest scenario run`.
	Reproduced string `json:"reproduced,omitempty"`
	// Random says how often plain --nemesis all, with no script, caught
	// it in runs of the scenario's recipe ("" not measured).
	Random string `json:"random,omitempty"`
}

// Entry is a row of the catalog's table of upstream bugs: a bug, the
// scenario that reproduces it and the contrasts that pass under the same
// schedule.
type Entry struct {
	Bug
	Scenario string `json:"scenario"`
	// Contrasts are the recipes the scenario expects to keep every
	// promise it judges: the fixed version, or the fix applied.
	Contrasts []string `json:"contrasts,omitempty"`
}

// Entries is the table of the upstream bugs the catalog reproduces, in
// catalog order.
func (c Catalog) Entries() []Entry {
	var out []Entry
	for _, sc := range c {
		var contrasts []string
		for _, r := range slices.Sorted(maps.Keys(sc.ByRecipe)) {
			e := sc.ByRecipe[r]
			if len(e) > 0 && !slices.ContainsFunc(slices.Collect(maps.Values(e)), func(v string) bool { return v != Valid }) {
				contrasts = append(contrasts, r)
			}
		}
		for _, b := range sc.Bugs {
			out = append(out, Entry{Bug: b, Scenario: sc.Name, Contrasts: contrasts})
		}
	}
	return out
}

// String is the bug in one line: "etcd#22082 (open; ...), seen in etcd
// 3.6.16, with --recipe mutex-retry".
func (b Bug) String() string {
	s := fmt.Sprintf("%s (%s), seen in %s", b.Ref, b.Status, b.Seen)
	if len(b.Recipes) > 0 {
		s += ", with " + RecipeFlags(b.Recipes)
	}
	return s
}

// RecipeFlags says recipes as the --recipe flags that name them, quoted as
// a shell reads them (an exec recipe's spec has spaces), joined by "or".
func RecipeFlags(recipes []string) string {
	var out []string
	for _, r := range recipes {
		out = append(out, "--recipe "+shellwords.Quote(r))
	}
	return strings.Join(out, " or ")
}

// Extension is what a backend adds to a scenario of every lock: the
// verdicts its recipes give (ByRecipe), and the lesson and the upstream
// bugs they bring.
type Extension struct {
	Scenario string
	ByRecipe map[string]map[string]string
	Lesson   string
	Bugs     []Bug
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
	if len(sc.Bugs) == 0 {
		return sc.Summary
	}
	var refs []string
	for _, b := range sc.Bugs {
		refs = append(refs, b.Ref)
	}
	return sc.Summary + " (" + strings.Join(refs, ", ") + ")"
}

// Recipes are the recipes a plan plays sc with to show what it expects:
// the one it is about, then those its expectations name, in order; none
// when it names none.
func (sc Scenario) Recipes() []string {
	var out []string
	if r := sc.Run.Recipe; r != "" {
		out = append(out, r)
	}
	for _, r := range slices.Sorted(maps.Keys(sc.ByRecipe)) {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// Settings are a scenario's run settings, typed, so that the harness can
// apply them to a run of any lock (harness.Play, harness.Apply; the CLI
// applies those its command line does not give). A zero field leaves the
// run's own.
type Settings struct {
	// Recipe is the recipe the scenario is about ("": any lock's
	// scenario): a built-in, or an adapter of a real library
	// ("exec:COMMAND…", its adapter named from the repository's root,
	// execlock.Adapters), which runs on Backend.
	Recipe  string
	Backend string
	// Workload and Items are the critical section's (histories.Workload*).
	Workload string
	Items    int
	Clients  int
	// TTL is the lease or session timeout, in whole seconds (a scenario
	// whose timing needs a longer one than the run's default).
	TTL int
	// Time is how long the faults last; Quiet how long the clients go on
	// after the final heal, and LivenessBound how soon they must get the
	// lock then.
	Time, Quiet, LivenessBound time.Duration
	// ThinkMin and Think are the critical section's think times, set
	// together (Think > 0).
	ThinkMin, Think time.Duration
	// OpTimeout bounds each operation.
	OpTimeout time.Duration
	// NoSlow leaves out slow sections (a slow share of 0): the scenario
	// asks for the sections it needs.
	NoSlow bool
	Guard  string
	// Require are the checks that decide the verdict.
	Require []string
	// System are settings of the backend's own system, by its flag
	// names (etcd-11456: member processes of Debian's etcd binary).
	System map[string]string
}

// common are the settings of every scenario: a shorter quiet period than
// a random run's, since a scenario's faults are over early and its
// clients are few, and no slow sections but those it asks for.
var common = Settings{Quiet: 6 * time.Second, LivenessBound: 5 * time.Second, NoSlow: true}

// over returns s with the fields o sets.
func (s Settings) over(o Settings) Settings {
	str := func(a *string, b string) {
		if b != "" {
			*a = b
		}
	}
	num := func(a *int, b int) {
		if b != 0 {
			*a = b
		}
	}
	dur := func(a *time.Duration, b time.Duration) {
		if b != 0 {
			*a = b
		}
	}
	str(&s.Recipe, o.Recipe)
	str(&s.Backend, o.Backend)
	str(&s.Workload, o.Workload)
	str(&s.Guard, o.Guard)
	num(&s.Items, o.Items)
	num(&s.Clients, o.Clients)
	num(&s.TTL, o.TTL)
	dur(&s.Time, o.Time)
	dur(&s.Quiet, o.Quiet)
	dur(&s.LivenessBound, o.LivenessBound)
	dur(&s.OpTimeout, o.OpTimeout)
	if o.Think > 0 {
		s.ThinkMin, s.Think = o.ThinkMin, o.Think
	}
	s.NoSlow = s.NoSlow || o.NoSlow
	if o.Require != nil {
		s.Require = slices.Clone(o.Require)
	}
	if o.System != nil {
		s.System = maps.Clone(s.System)
		if s.System == nil {
			s.System = map[string]string{}
		}
		maps.Copy(s.System, o.System)
	}
	return s
}

// Settings are the scenario's settings over the common ones.
func (sc Scenario) Settings() Settings { return common.over(sc.Run) }

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
		sc.Bugs = append(slices.Clone(sc.Bugs), e.Bugs...)
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
	return Scenario{}, fmt.Errorf("unknown scenario %q%s (want one of %s)", name, words.DidYouMean(name, c.Names()), strings.Join(c.Names(), ", "))
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
		Run:    Settings{Time: 8 * time.Second},
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
		Run:    Settings{Time: 6 * time.Second, Think: 2500 * time.Millisecond, ThinkMin: 2500 * time.Millisecond, Clients: 3},
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
		Run:    Settings{Time: 5 * time.Second, Think: 2 * time.Second, ThinkMin: 2 * time.Second, Clients: 3},
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
		Run:    Settings{Time: 6 * time.Second, Think: 500 * time.Millisecond, ThinkMin: 300 * time.Millisecond},
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
		Run:    Settings{Time: 8 * time.Second, Guard: "clock", Think: 1400 * time.Millisecond, ThinkMin: 1400 * time.Millisecond, Clients: 3},
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
		Run: Settings{Time: 8 * time.Second, Think: 300 * time.Millisecond, ThinkMin: 200 * time.Millisecond,
			Require: []string{histories.CheckContract}},
		Expect: map[string]map[string]string{
			Unfenced: {histories.CheckContract: Valid},
			Fenced:   {histories.CheckContract: Valid},
		},
		Faults: StarveWaiter,
	},
}

// StarveWaiter starves the lease renewals of a queued waiter (its links
// drop all data) until the server expires its lease, while the holder
// works: it stays in line, its key gone.
func StarveWaiter(s Shape) []nemesis.Entry {
	return []nemesis.Entry{{At: time.Second, Fault: nemesis.LeaseStarve, Target: nemesis.TargetWaiter, Fallback: "c1",
		Duration: 2*s.TTL + 2*time.Second}}
}
