package harness

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/backend/registry"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/resource"
	"github.com/locktest/locktest/system"
)

// Plan is one run as Run carries it out, computed once by NewPlan from
// Options before anything starts, and handed down unchanged: the system
// is started, the clients made, the faults drawn and the history checked
// from it. The results record its Options as the run's config and the
// command that reproduces it.
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
	// system is the run as its backend's options plan it.
	system backend.Plan
}

// NewPlan plans a run of o before anything starts: the backend of its
// recipe and the backend's options (its defaults where o has none)
// checked, the default recipe and resource filled in, the system sized,
// --nemesis all resolved to the families the backend's system offers, a
// scenario's schedule drawn, the required checks expanded ("all" is every
// check) and the other defaults filled in. An error says what is wrong, in
// the CLI's flag names where it can. The CLI prints a run's plan before
// starting it. o itself is left as it was.
func NewPlan(o Options) (*Plan, error) {
	system, err := o.plan()
	if err != nil {
		return nil, err
	}
	if o.Time <= 0 {
		return nil, fmt.Errorf("time must be positive, got %v", o.Time)
	}
	o.Workload.Resource = o.Resource
	if err := o.Workload.Validate(); err != nil {
		return nil, err
	}
	if len(o.Nemesis.Faults) > 0 && o.Quiet == 0 {
		o.Quiet = DefaultQuiet
	}
	if o.Quiet < 0 {
		return nil, fmt.Errorf("quiet period must not be negative, got %v", o.Quiet)
	}
	if o.Schedule != nil {
		if err := o.Schedule.Validate(); err != nil {
			return nil, err
		}
		if o.Schedule.Members != o.Members && !o.FitSchedule {
			return nil, fmt.Errorf("the schedule is for %d members, the run has %d", o.Schedule.Members, o.Members)
		}
	}
	if o.Required == nil {
		o.Required = []string{RequireData}
	}
	o.Required, err = expandRequire(o.Required)
	if err != nil {
		return nil, err
	}
	if o.CheckTimeout == 0 {
		o.CheckTimeout = time.Minute
	}
	if o.LivenessBound == 0 {
		o.LivenessBound = DefaultLivenessBound
	}
	return &Plan{Options: o, system: system}, nil
}

// plan resolves o's recipe, backend, system and faults (see NewPlan), and
// returns the run as its backend's options plan it.
func (o *Options) plan() (backend.Plan, error) {
	b, builtin, isBuiltin, err := o.chooseBackend()
	if err != nil {
		return backend.Plan{}, err
	}
	if o.Workload.Recipe == nil {
		if o.Workload.Recipe, err = registry.NewRecipe(builtin.Name, o.System); err != nil {
			return backend.Plan{}, err
		}
	}
	if isBuiltin && builtin.NoFencingToken {
		// A built-in's word, for a recipe made without the registry.
		o.Workload.Recipe = lock.MarkUnfenced(o.Workload.Recipe)
	}
	if o.Resource == "" {
		o.Resource = resource.Fenced
	}
	if err := o.checkResource(b); err != nil {
		return backend.Plan{}, err
	}
	p := backend.Plan{Recipe: o.RecipeName, Majority: isBuiltin && builtin.Majority, Families: o.faultFamilies(), Members: o.Members, Resource: o.Resource}
	if o.Members, err = o.System.Plan(p); err != nil {
		return backend.Plan{}, err
	}
	if o.play != nil {
		if o.Members, err = o.stage(p, o.Members); err != nil {
			return backend.Plan{}, err
		}
	}
	p.Members = o.Members
	if err := o.refuseByRecipe(); err != nil {
		return backend.Plan{}, err
	}
	proto := o.System.Prototype(p)
	offers := o.recipeOffers(nemesis.Offered(proto))
	if o.DefaultFaults {
		o.Nemesis.Faults = nemesis.Offering(o.Nemesis.Faults, offers)
	}
	if o.Schedule == nil {
		// A family asked for by name that the system cannot carry out at
		// all is refused now, before any server starts (a stored or
		// fitted schedule drops what its system cannot take).
		for _, name := range o.Nemesis.Faults {
			lacks := nemesis.Lacks(name, proto)
			if len(lacks) == 0 {
				continue
			}
			where := fmt.Sprintf(" (it offers %s)", strings.Join(nemesis.Expand([]string{nemesis.All}, offers), ", "))
			if h, ok := proto.(system.Hinter); ok {
				where = "; " + h.Hint()
			}
			return backend.Plan{}, fmt.Errorf("--nemesis: fault %s needs %s, which %s does not offer%s", name, capNames(lacks), b.Name, where)
		}
	}
	o.Nemesis.Faults = nemesis.Expand(o.Nemesis.Faults, offers)
	p.Families = o.faultFamilies()
	return p, nil
}

// refuseByRecipe refuses, by name, a fault family that the recipe under
// test cannot suffer (lock.Limited): one --nemesis names, or one of the
// schedule's, unless the schedule is to be fitted (its faults the run
// cannot carry out are then dropped).
func (o *Options) refuseByRecipe() error {
	l, ok := o.Workload.Recipe.(lock.Limited)
	if !ok {
		return nil
	}
	for _, f := range o.Nemesis.Faults {
		if why := l.Refuses(f); why != "" {
			return fmt.Errorf("--nemesis %s: %s", f, why)
		}
	}
	if o.Schedule != nil && !o.FitSchedule {
		for _, f := range o.Schedule.Families() {
			if why := l.Refuses(f); why != "" {
				return fmt.Errorf("the schedule's %s faults: %s", f, why)
			}
		}
	}
	return nil
}

// recipeOffers narrows the fault kinds a system offers to those the
// recipe under test can suffer (lock.Limited).
func (o *Options) recipeOffers(offers func(kind string) bool) func(kind string) bool {
	l, ok := o.Workload.Recipe.(lock.Limited)
	if !ok {
		return offers
	}
	return func(kind string) bool { return offers(kind) && l.Refuses(nemesis.FamilyOf(kind)) == "" }
}

// chooseBackend is the backend of the run: that of o.System if set, else
// o.Backend if set (a recipe that is not a built-in runs on any backend:
// a team's own, a lock in another process), else the recipe's (the
// default backend's for one that is not a built-in); its default options
// where o has none. It names the run's backend and recipe (Backend,
// RecipeName: the backend's first when o has none); builtin is that recipe
// as a built-in, ok false for a recipe that is no built-in.
func (o *Options) chooseBackend() (b backend.Backend, builtin lock.Builtin, ok bool, err error) {
	recipe, system := "", ""
	if o.Workload.Recipe != nil {
		recipe = o.Workload.Recipe.Name()
	}
	if o.System != nil {
		system = o.System.Backend()
	}
	// The registry, asked at once of every name the run gives.
	builtin, own, ok := registry.Builtin(recipe)
	named, namedOK := registry.Named(o.Backend)
	ofSystem, systemOK := registry.Named(system)
	b = registry.Default()
	if ok {
		b = own
	}
	if o.Backend != "" {
		if !namedOK {
			return b, builtin, ok, fmt.Errorf("unknown backend %q (want one of %s)", o.Backend, strings.Join(registry.Names(), ", "))
		}
		if ok && own.Name != named.Name {
			return b, builtin, ok, fmt.Errorf("recipe %s runs on %s, not %s", recipe, own.Name, named.Name)
		}
		b = named
	}
	if o.System != nil {
		if !systemOK {
			return b, builtin, ok, fmt.Errorf("harness: options of a backend locktest does not know: %q", system)
		}
		if ok && own.Name != ofSystem.Name {
			return b, builtin, ok, fmt.Errorf("recipe %s runs on %s; the options are %s's", recipe, own.Name, ofSystem.Name)
		}
		if ofSystem.Name != b.Name && o.Backend != "" {
			return b, builtin, ok, fmt.Errorf("the run's backend is %s; the options are %s's", b.Name, ofSystem.Name)
		}
		b = ofSystem
	} else {
		o.System = b.Defaults()
	}
	o.Backend, o.RecipeName = b.Name, recipe
	if recipe == "" {
		builtin, ok = b.Recipes[0], true
		o.RecipeName = builtin.Name
	}
	return b, builtin, ok, nil
}

// checkResource refuses a resource mode the run's backend does not keep:
// one of another backend's, or none at all.
func (o *Options) checkResource(b backend.Backend) error {
	if o.Resource.HTTP() || slices.ContainsFunc(b.Resources, func(r backend.Resource) bool { return r.Mode == o.Resource }) {
		return nil
	}
	if keeper, ok := registry.Keeper(o.Resource); ok {
		return fmt.Errorf("--resource %s keeps the values in %s: recipe %s runs on %s (use fenced or unfenced)", o.Resource, keeper.Name, o.RecipeName, b.Name)
	}
	_, err := registry.ParseResource(string(o.Resource))
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

// startSystem starts the system under test of the run's backend, as
// planned.
func (p *Plan) startSystem(ctx context.Context, logs string) (*backend.Started, error) {
	bp := p.system
	bp.Dir, bp.LogDir, bp.Logf = p.Dir, logs, p.logf
	return p.System.Start(ctx, bp)
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

// capNames are caps in words: "leases", "partition and leader".
func capNames(caps []system.Capability) string {
	names := make([]string, len(caps))
	for i, c := range caps {
		names[i] = string(c)
	}
	return strings.Join(names, " and ")
}
