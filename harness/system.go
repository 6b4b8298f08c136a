package harness

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/lock/execlock"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/resource"
)

// Plan is one run as Run carries it out, computed once by NewPlan from
// Options before anything starts, and handed down unchanged: the system
// is started, the clients made and the faults carried out from it. The
// results record its Options as the run's config and the command that
// reproduces it.
type Plan struct {
	// Options are the run's options resolved: the backend of its recipe
	// and the backend's options (its defaults where none were given), the
	// default recipe and resource, the system's size (Members), --nemesis
	// all resolved to the families the system offers, the required checks
	// expanded, and every other default filled in. Dir and Log say where
	// and how this run is carried out, and are not planned: a caller sets
	// them on a plan. Any other change (another seed, a scenario staged)
	// is one to the options, planned again.
	Options
	// system is the run's system as its backend planned it, which Run
	// starts: its members' names (the schedule's faults strike them; ""
	// for one the system names only once reached, an external cluster's),
	// what it offers, the flags that give it.
	system backend.Planned
	// faults configure the nemesis with the planned facts: the members,
	// the clients, the fault kinds the run can carry out (those its
	// system offers that the recipe can suffer), a grant's quorum.
	faults nemesis.Config
	// schedule is the faults the run carries out: the one replayed (fitted
	// to this system, with what it cannot carry out in dropped), or one
	// drawn from the seed; nil without faults.
	schedule *nemesis.Schedule
	dropped  []nemesis.Entry
	// facts are what the checks learn of the run's backend and recipe
	// from the Backends for a stored history, known here.
	facts *checkFacts
	// builtin says the recipe is a built-in; reproducible, that the
	// command line can name it: a built-in or a lock in another process
	// (exec:), not a team's own Go recipe.
	builtin, reproducible bool
	// httpResource says the run serves the protected resource over HTTP;
	// else its backend keeps it (resource.Mode.HTTP).
	httpResource bool
}

// NewPlan plans a run of o before anything starts: the backend of its
// recipe and the backend's options (its defaults where o has none)
// checked, the default recipe and resource filled in, the system sized and
// its members named, --nemesis all resolved to the families the backend's
// system offers, the fault schedule drawn (or a scenario's, or the one
// replayed, fitted), the required checks expanded ("all" is every check)
// and the other defaults filled in. An error says what is wrong, in the
// CLI's flag names where it can. The CLI prints a run's plan before
// starting it. o itself is left as it was. Each package it asks is asked
// once: the Backends (the recipe's backend), the backend (the system),
// the workload (its clients), the nemesis (the faults and their
// schedule); what they return is what Run carries out.
func NewPlan(o Options) (*Plan, error) {
	p := &Plan{}
	if err := o.plan(p); err != nil {
		return nil, err
	}
	if o.Time <= 0 {
		return nil, fmt.Errorf("time must be positive, got %v", o.Time)
	}
	o.Workload.Resource = o.Resource
	clients, err := o.Workload.Plan()
	if err != nil {
		return nil, err
	}
	ask := nemesis.Ask{Config: o.nemesisConfig(p.system.Members, clients, grantQuorum(p.system.Plan.Majority, len(p.system.Members))),
		Seed: o.Workload.Seed, System: p.system.Prototype, Backend: o.Backend, Default: o.DefaultFaults, Schedule: o.Schedule, Fit: o.FitSchedule}
	// A lock in a process of its own tells no lease of its waiters.
	ask.Config.UntoldWaiters = !p.builtin
	if l, ok := o.Workload.Recipe.(lock.Limited); ok {
		ask.Refuses = l.Refuses
	}
	nem, err := nemesis.Plan(ask)
	if err != nil {
		return nil, err
	}
	o.Nemesis.Faults = nem.Config.Faults
	if len(o.Nemesis.Faults) > 0 && o.Quiet == 0 {
		o.Quiet = DefaultQuiet
	}
	if o.Quiet < 0 {
		return nil, fmt.Errorf("quiet period must not be negative, got %v", o.Quiet)
	}
	p.Options, p.faults, p.schedule, p.dropped = o, nem.Config, nem.Schedule, nem.Dropped
	p.system.Plan.Families = nem.Families
	if p.Required == nil {
		p.Required = []string{RequireData}
	}
	if p.Required, err = expandRequire(p.Required); err != nil {
		return nil, err
	}
	if p.CheckTimeout == 0 {
		p.CheckTimeout = time.Minute
	}
	if p.LivenessBound == 0 {
		p.LivenessBound = DefaultLivenessBound
	}
	return p, nil
}

// plan resolves o's recipe, backend and system (see NewPlan) into p.
func (o *Options) plan(p *Plan) error {
	if o.Backends == nil {
		return errNoBackends
	}
	c, err := o.Backends.Resolve(o.Workload.Recipe, o.Backend, o.System)
	if err != nil {
		return err
	}
	o.Backend, o.RecipeName, o.System, o.Workload.Recipe = c.Backend.Name, c.RecipeName, c.Options, c.Recipe
	if o.Resource == "" {
		o.Resource = resource.Fenced
	}
	p.httpResource = o.Resource.HTTP()
	if err := o.checkResource(c.Backend, p.httpResource); err != nil {
		return err
	}
	p.facts = &checkFacts{backend: c.Backend.Name, terms: c.Backend.Terms, noFencing: c.IsBuiltin && c.Builtin.NoFencingToken}
	p.builtin, p.reproducible = c.IsBuiltin, c.IsBuiltin || execlock.IsSpec(c.RecipeName)
	bp := backend.Plan{Recipe: o.RecipeName, Majority: c.IsBuiltin && c.Builtin.Majority, Families: o.faultFamilies(), Members: o.Members, Resource: o.Resource}
	if p.system, err = backend.PlanRun(o.System, bp); err != nil {
		return err
	}
	if o.play != nil {
		// The scenario's schedule may change the system (a failover needs
		// a replica, which the system then offers): the run's is the one
		// planned for it.
		if p.system, err = o.stage(bp, p.system); err != nil {
			return err
		}
	}
	o.Members = len(p.system.Members)
	return nil
}

// errNoBackends refuses a run, or a check, given no backends: it would
// know no recipe's backend, nor a history's words.
var errNoBackends = errors.New("harness: no Backends given (registry.Backends() of package backend/registry has every backend locktest has)")

// checkResource refuses a resource mode the run's backend does not keep
// (http: the run serves it): one of another backend's, or none at all.
func (o *Options) checkResource(b backend.Backend, http bool) error {
	if http || slices.ContainsFunc(b.Resources, func(r backend.Resource) bool { return r.Mode == o.Resource }) {
		return nil
	}
	if keeper, ok := o.Backends.Keeper(o.Resource); ok {
		return fmt.Errorf("--resource %s keeps the values in %s: recipe %s runs on %s (use fenced or unfenced)", o.Resource, keeper.Name, o.RecipeName, b.Name)
	}
	_, err := o.Backends.ParseResource(string(o.Resource))
	return err
}

// faultFamilies are the fault families the run may inject: those of
// --nemesis, and those of the schedule it replays.
func (o *Options) faultFamilies() []string {
	fs := slices.Clone(o.Nemesis.Faults)
	if o.Schedule != nil {
		fs = append(fs, o.Schedule.Families()...)
	}
	return fs
}

// grantQuorum is how many of a run's members a grant takes when each holds
// its own copy of the lock (majority: lock.Builtin.Majority, Redlock's
// majority of its masters, as planned); 0 for every other recipe, whose
// members replicate one lock.
func grantQuorum(majority bool, members int) int {
	if !majority {
		return 0
	}
	return members/2 + 1
}
