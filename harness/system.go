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
	"github.com/locktest/locktest/workload"
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
	// system is the run as its backend's options plan it.
	system backend.Plan
	// members name the system's members as its backend plans them: the
	// names the schedule's faults strike ("" for one the system names
	// only once reached, an external cluster's).
	members []string
	// faults configure the nemesis with the planned facts: the members,
	// the clients, the fault kinds the run can carry out (those its
	// system offers that the recipe can suffer), a grant's quorum.
	faults nemesis.Config
	// schedule is the faults the run carries out: the one replayed (fitted
	// to this system, with what it cannot carry out in dropped), or one
	// drawn from the seed; nil without faults.
	schedule *nemesis.Schedule
	dropped  []nemesis.Entry
}

// NewPlan plans a run of o before anything starts: the backend of its
// recipe and the backend's options (its defaults where o has none)
// checked, the default recipe and resource filled in, the system sized and
// its members named, --nemesis all resolved to the families the backend's
// system offers, the fault schedule drawn (or a scenario's, or the one
// replayed, fitted), the required checks expanded ("all" is every check)
// and the other defaults filled in. An error says what is wrong, in the
// CLI's flag names where it can. The CLI prints a run's plan before
// starting it. o itself is left as it was.
func NewPlan(o Options) (*Plan, error) {
	system, members, proto, err := o.plan()
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
	clients := workload.ClientNames(o.Workload.Clients)
	offers, err := o.planFaults(proto)
	if err != nil {
		return nil, err
	}
	p := &Plan{Options: o, system: system, members: members}
	p.faults = p.nemesisConfig(members, clients, offers, grantQuorum(system.Majority, len(members)))
	if err := p.drawSchedule(); err != nil {
		return nil, err
	}
	p.system.Families = p.faultFamilies()
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

// plan resolves o's recipe, backend and system (see NewPlan), and returns
// the run as its backend's options plan it, the members they name, and a
// prototype of the system (backend.Options.Prototype).
func (o *Options) plan() (p backend.Plan, members []string, proto system.System, err error) {
	c, err := registry.Resolve(o.Workload.Recipe, o.Backend, o.System)
	if err != nil {
		return p, nil, nil, err
	}
	o.Backend, o.RecipeName, o.System, o.Workload.Recipe = c.Backend.Name, c.RecipeName, c.Options, c.Recipe
	if o.Resource == "" {
		o.Resource = resource.Fenced
	}
	if err := o.checkResource(c.Backend); err != nil {
		return p, nil, nil, err
	}
	p = backend.Plan{Recipe: o.RecipeName, Majority: c.IsBuiltin && c.Builtin.Majority, Families: o.faultFamilies(), Members: o.Members, Resource: o.Resource}
	if members, err = o.System.Plan(p); err != nil {
		return p, nil, nil, err
	}
	if o.play != nil {
		if members, err = o.stage(p, members); err != nil {
			return p, nil, nil, err
		}
	}
	o.Members = len(members)
	p.Members = o.Members
	if err := o.refuseByRecipe(); err != nil {
		return p, nil, nil, err
	}
	return p, members, o.System.Prototype(p), nil
}

// planFaults resolves o's faults for a system like proto: a schedule
// replayed checked, the default faults narrowed to those it offers, what
// it cannot carry out at all refused, --nemesis all resolved, and the
// quiet period's default. It returns the fault kinds the run can carry
// out: those proto offers that the recipe can suffer.
func (o *Options) planFaults(proto system.System) ([]string, error) {
	if o.Schedule != nil {
		if err := o.Schedule.Validate(); err != nil {
			return nil, err
		}
		if o.Schedule.Members != o.Members && !o.FitSchedule {
			return nil, fmt.Errorf("the schedule is for %d members, the run has %d", o.Schedule.Members, o.Members)
		}
	}
	offers := o.recipeOffers(nemesis.Offered(proto))
	if o.DefaultFaults {
		o.Nemesis.Faults = nemesis.Offering(o.Nemesis.Faults, offers)
	}
	// What the system cannot carry out at all is refused now, before any
	// server starts: a family asked for by name, or a kind of the
	// schedule replayed (a fitted schedule drops what its system cannot
	// take).
	refuse := func(what, name string) error {
		lacks := nemesis.Lacks(name, proto)
		if len(lacks) == 0 {
			return nil
		}
		where := fmt.Sprintf(" (it offers %s)", strings.Join(nemesis.Expand([]string{nemesis.All}, offers), ", "))
		if h, ok := proto.(system.Hinter); ok {
			where = "; " + h.Hint()
		}
		return fmt.Errorf("%s %s needs %s, which %s does not offer%s", what, name, capNames(lacks), o.Backend, where)
	}
	switch {
	case o.Schedule == nil:
		for _, name := range o.Nemesis.Faults {
			if err := refuse("--nemesis: fault", name); err != nil {
				return nil, err
			}
		}
	case !o.FitSchedule:
		for _, e := range o.Schedule.Entries {
			if err := refuse("the schedule's fault", e.Fault); err != nil {
				return nil, err
			}
		}
	}
	o.Nemesis.Faults = nemesis.Expand(o.Nemesis.Faults, offers)
	if len(o.Nemesis.Faults) > 0 && o.Quiet == 0 {
		o.Quiet = DefaultQuiet
	}
	if o.Quiet < 0 {
		return nil, fmt.Errorf("quiet period must not be negative, got %v", o.Quiet)
	}
	return offers, nil
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
// recipe under test can suffer (lock.Limited), once, as data the nemesis
// is handed.
func (o *Options) recipeOffers(offers []string) []string {
	l, ok := o.Workload.Recipe.(lock.Limited)
	if !ok {
		return offers
	}
	return slices.DeleteFunc(slices.Clone(offers), func(kind string) bool { return l.Refuses(nemesis.FamilyOf(kind)) != "" })
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
