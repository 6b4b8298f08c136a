// Package backend is the seam between locktest and a lock service it tests.
// A backend (etcd, Redis, the next one) is one folder under backend/ that
// describes itself as a Backend, and one line in package backend/registry;
// nothing outside its folder names it. The workload, the harness, the
// checks, the scenarios, the report and the CLI learn from here all they
// know of one:
//
//   - what it is called, in histories and results (Name), and its words for
//     the stories, the summaries and the report (Terms: a lease or a TTL, by
//     revisions or not; the contract promises its server's data lets the
//     check judge follow from them);
//   - its built-in lock recipes (Recipes; each recipe's package, such as
//     backend/etcd/etcdlock, is the API a team's own recipe is written
//     against);
//   - its command-line flags and what they set (Flags, Options): which of
//     its systems a run starts (servers in locktest's process, as OS
//     processes, a running cluster), with which binary;
//   - how it starts that system for a run (Options.Start): its servers,
//     their logs, every client link behind toxiproxy, the capabilities it
//     offers the faults (package system; a family of package nemesis
//     strikes every system that offers what it needs, and --nemesis all is
//     every family it offers), each client's connection and the observer of
//     the server's truth (package workload's Backend);
//   - the resource modes it keeps in its own system (Resources), its own
//     catalog scenarios and what it adds to the scenarios of every lock
//     (Scenarios, Extensions), and what to install when its server is
//     missing (Missing).
//
// Imports run one way: a backend's folder imports the core (workload,
// system, nemesis, checker, scenario, resource, lock) and never the harness;
// the core imports no backend, nor does the harness, which is given a Set;
// only backend/registry imports the backends, and the CLI hands its Set to
// the harness.
package backend

import (
	"context"
	"flag"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/resource"
	"github.com/locktest/locktest/scenario"
	"github.com/locktest/locktest/system"
	"github.com/locktest/locktest/workload"
)

// Backend describes one lock service: what locktest knows of it without
// starting anything. Its Options, from its flags or a Go caller, start its
// system.
type Backend struct {
	// Name names it in histories (the setup event's backend), results
	// and stories: "etcd".
	Name string
	// Recipes are its built-in lock recipes, the correct ones first:
	// --recipe takes their names.
	Recipes []lock.Builtin
	// Terms are its words for the stories, the summaries and the report,
	// and what of the contract its server's data cannot order.
	Terms checker.Terms
	// Resources are the resource modes it keeps in its own system (its
	// run's workload.Backend is then a workload.Keeper).
	Resources []Resource
	// Scenarios are its own catalog scenarios; Extensions what it adds to
	// the scenarios of every lock (the verdicts of its recipes).
	Scenarios  []scenario.Scenario
	Extensions []scenario.Extension
	// Modules name the Go modules of its servers built into locktest, by
	// the key results.json's versions give their version under.
	Modules map[string]string
	// Flags adds its command-line flags to fs, and returns what reads them
	// back into its Options once fs is parsed (an error names the flag).
	Flags func(fs *flag.FlagSet) func() (Options, error)
	// Defaults are its Options when a Go caller gives none.
	Defaults func() Options
	// Missing says what this machine lacks to run with these settings
	// (run flags by name, a scenario's: its binary, its server) and what
	// to install; nil when nothing.
	Missing func(settings map[string]string) error
}

// Resource is a resource mode a backend keeps in its own system.
type Resource struct {
	Mode resource.Mode
	// Help says what it is, for --resource's help: "values in etcd,
	// written by Txns guarded by the lock".
	Help string
}

// Options are a backend's settings of one run: which of its systems it
// starts and how. Each backend has its own type, which a Go caller may
// fill in (harness.Options.System); they are stored in results.json.
type Options interface {
	// Backend names the backend they are for.
	Backend() string
	// Plan checks them for a run of p before anything starts, in the
	// CLI's flag names (a missing binary too), and names the members the
	// system will have, in order, as its MemberNames will once started:
	// their number is its size, and the run's faults are drawn against
	// these names. A name known only once the system is reached (a
	// running cluster's own) is "", and the harness then takes the
	// started system's.
	Plan(p Plan) (members []string, err error)
	// Prototype is a system of the type Start would return for p, not
	// started: only the capabilities it offers (the interfaces it
	// implements) may be asked of it. It decides what --nemesis all draws
	// from before anything starts.
	Prototype(p Plan) system.System
	// Args are the command-line flags that give these options, and the
	// number of members where it is the user's choice, for the command
	// that reproduces a run: one word an element, as the program receives
	// them ("--members", "3"), quoted when the command line is written.
	Args(members int) []string
	// Start starts (or connects to) the system of a run of p, whose
	// Members Plan returned. Everything it starts is stopped by the
	// Started's Close, and nothing outlives locktest.
	Start(ctx context.Context, p Plan) (*Started, error)
}

// Maker is implemented by Options that make some of their backend's
// built-in recipes themselves (a flag sets an interval): Recipe returns
// the recipe called name as the options make it, false for the others.
type Maker interface {
	Recipe(name string) (lock.Recipe, bool)
}

// Plan is a run as the harness plans it, for its backend's Options.
type Plan struct {
	// Recipe is the name of the recipe under test.
	Recipe string
	// Majority says its grants take a majority of the members, each
	// holding its own copy (lock.Builtin.Majority).
	Majority bool
	// Families are the fault families the run may inject: those of
	// --nemesis (before All is resolved) and of a schedule it replays.
	Families []string
	// Members is the number of members asked for (0: the default); in
	// Start, the number Plan returned.
	Members int
	// Resource is the resource mode.
	Resource resource.Mode
	// Dir is the run directory (nothing of the run is to be left outside
	// it, a killed run's neither) and LogDir the servers' logs' (Start
	// only).
	Dir, LogDir string
	// Logf, if set, takes a line for the user (Start only): what the
	// start found left by a killed run, say.
	Logf func(format string, args ...any)
}

// Started is a backend's system of one run, started.
type Started struct {
	// System is the system under test, with the capabilities it offers.
	System system.System
	// Workload is how the clients reach it, and its observer.
	Workload workload.Backend
	// Version is the version of its servers ("3.6.16").
	Version string
	// Prefix, if set, is where the run's lock keys must live (a running
	// cluster that others use); "" keeps the workload's.
	Prefix string
	// Close stops everything Start started.
	Close func() error
}

// Planned is a run's system as its backend plans it (PlanRun), before
// anything starts; Start starts it.
type Planned struct {
	// Plan is the run as planned; its Members is the number Members
	// names. The harness completes its Families once the faults are
	// resolved.
	Plan Plan
	// Members name the system's members (Options.Plan).
	Members []string
	// Prototype is a system of the type Start returns, not started: what
	// it offers the faults (Options.Prototype).
	Prototype system.System
	// Args are the command-line flags that give the options, for the
	// command that reproduces the run (Options.Args).
	Args []string

	options Options
}

// PlanRun asks o to plan a run of p: its members (an error says what is
// wrong before anything starts), what its system offers, and the flags
// that give o.
func PlanRun(o Options, p Plan) (Planned, error) {
	members, err := o.Plan(p)
	if err != nil {
		return Planned{}, err
	}
	p.Members = len(members)
	return Planned{Plan: p, Members: members, Prototype: o.Prototype(p), Args: o.Args(len(members)), options: o}, nil
}

// Start starts the system as planned: its data under the run directory
// dir, its servers' logs in logDir, a line for the user to logf.
func (p Planned) Start(ctx context.Context, dir, logDir string, logf func(format string, args ...any)) (*Started, error) {
	run := p.Plan
	run.Dir, run.LogDir, run.Logf = dir, logDir, logf
	return p.options.Start(ctx, run)
}
