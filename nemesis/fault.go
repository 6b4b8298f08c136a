package nemesis

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/system"
)

// A Family is one kind of trouble: --nemesis takes its Name, and each of its
// kinds is a fault a schedule entry can hold (the value.fault of its
// history events). Adding a family is one file implementing it, plus its
// line in families.
type Family interface {
	// Name is the family's --nemesis and --fault-durations name.
	Name() string
	// Kinds lists the family's fault kinds that apply to a system of
	// members members, with or without workload clients, in the order
	// Generate draws from.
	Kinds(members int, clients bool) []string
	// Needs names what kind needs of the system under test.
	Needs(kind string) []system.Capability
	// Durations is the default range of its faults' durations, given the
	// lease TTL.
	Durations(ttl time.Duration) Range
	// Draw fills in e, a fault of kind, from the schedule's generator: its
	// targets, duration (from d) and parameters.
	Draw(g *Gen, e *Entry, d Range)
	// Check says whether e, a fault of this family, is well-formed for a
	// system of members members.
	Check(e Entry, members int) error
	// Inject starts e; the fault lasts until the returned Injected's Hold
	// (or e.Duration) is over, and Stop undoes it.
	Inject(ctx context.Context, env *Env, e Entry) (*Injected, error)
	// Heal undoes whatever faults of the family may have left behind, at
	// the end of a run, and names the members or clients it restored.
	// Toxics on client links are not its: the runner removes them all.
	Heal(ctx context.Context, env *Env) (healed []string, err error)
	// Describe says in words what a fault of kind did to its targets, for
	// the checks' stories ("c4 was paused").
	Describe(kind string, targets []string) string
	// Doc says what its faults do, for the generated reference.
	Doc() string
}

// weighted is a family whose kinds are not equally likely: Generate draws
// a kind in proportion to its weight.
type weighted interface {
	Weight(kind string) int
}

// families is the registry, in canonical order: --nemesis lists them so,
// and Generate draws from them so (reordering changes every schedule).
var families = []Family{
	partition{},
	isolate{},
	lease{},
	clockFault{},
	pause{},
	crash{},
	slow{},
	membership{},
	failover{},
	clockJump{},
	lostReply{},
}

// oncePerRun is a family whose faults a system carries out once per run:
// Generate draws one at most.
type oncePerRun interface {
	oncePerRun()
}

// byNameOnly is a family that --nemesis all leaves out (Expand).
type byNameOnly interface {
	byNameOnly()
}

// Needs names what the kinds of family name need of the system under
// test, together; nil for a name no family has.
func Needs(name string) []system.Capability {
	f, ok := family(name)
	if !ok {
		return nil
	}
	var out []system.Capability
	for _, k := range f.Kinds(5, true) {
		for _, c := range f.Needs(k) {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// Lacks names what sys lacks to carry out any fault of family name: the
// fewest capabilities missing for one of its kinds; nil when sys can carry
// out some kind of it (or there is no such family).
func Lacks(name string, sys system.System) []system.Capability {
	f, ok := family(name)
	if !ok {
		return nil
	}
	var fewest []system.Capability
	for _, k := range f.Kinds(5, true) {
		miss := system.Missing(sys, f.Needs(k))
		if len(miss) == 0 {
			return nil
		}
		if fewest == nil || len(miss) < len(fewest) {
			fewest = miss
		}
	}
	return fewest
}

// Families are the registered families, in canonical order.
func Families() []Family { return slices.Clone(families) }

// ByNameOnly says whether --nemesis all leaves f out: a run asks for it by
// name.
func ByNameOnly(f Family) bool {
	_, ok := f.(byNameOnly)
	return ok
}

// Categories are the names --nemesis accepts, in canonical order.
func Categories() []string {
	out := make([]string, len(families))
	for i, f := range families {
		out[i] = f.Name()
	}
	return out
}

// family returns the family called name.
func family(name string) (Family, bool) {
	for _, f := range families {
		if f.Name() == name {
			return f, true
		}
	}
	return nil, false
}

// familyOf returns the family of a fault kind.
func familyOf(kind string) (Family, bool) {
	for _, f := range families {
		if slices.Contains(f.Kinds(5, true), kind) {
			return f, true
		}
	}
	return nil, false
}

// FamilyOf names the family of a fault kind ("clock" for "clock-rate"); ""
// for a kind no family has.
func FamilyOf(kind string) string {
	if f, ok := familyOf(kind); ok {
		return f.Name()
	}
	return ""
}

// AllKinds lists every fault kind.
func AllKinds() []string {
	var ks []string
	for _, f := range families {
		ks = append(ks, f.Kinds(5, true)...)
	}
	return ks
}

// Describe says in words what a fault of kind did to its targets, for the
// checks' stories; false for a kind no family knows.
func Describe(kind string, targets []string) (string, bool) {
	f, ok := familyOf(kind)
	if !ok {
		return "", false
	}
	return f.Describe(kind, targets), true
}

// Refuse says which of the faults (categories) the system cannot run at
// all, and why, naming the capability it lacks; nil when it can run some
// kind of each. Of a family it can run in part (a pause of a client but not
// of a member), Generate draws the kinds it offers (Offered).
func Refuse(sys system.System, faults []string) error {
	for _, name := range faults {
		f, ok := family(name)
		if !ok {
			return fmt.Errorf("nemesis: unknown fault %q", name)
		}
		var first error
		offered := false
		for _, k := range f.Kinds(len(sys.MemberNames()), true) {
			err := system.Refuse(sys, "fault "+k, f.Needs(k))
			if err == nil {
				offered = true
				break
			}
			if first == nil {
				first = err
			}
		}
		if !offered && first != nil {
			return fmt.Errorf("nemesis: %w", first)
		}
	}
	return nil
}

// Offered says which fault kinds sys can carry out, for Config.Offers.
func Offered(sys system.System) func(kind string) bool {
	return func(kind string) bool {
		f, ok := familyOf(kind)
		return ok && len(system.Missing(sys, f.Needs(kind))) == 0
	}
}

// kinds are the kinds of f that Generate may draw.
func (c Config) kinds(f Family, clients bool) []string {
	ks := f.Kinds(c.Members, clients)
	if c.Offers == nil {
		return ks
	}
	return slices.DeleteFunc(ks, func(k string) bool { return !c.Offers(k) })
}

// RefuseSchedule is Refuse for the kinds a schedule holds.
func RefuseSchedule(sys system.System, s Schedule) error {
	for _, e := range s.Entries {
		f, ok := familyOf(e.Fault)
		if !ok {
			return fmt.Errorf("nemesis: unknown fault kind %q", e.Fault)
		}
		if err := system.Refuse(sys, "fault "+e.Fault, f.Needs(e.Fault)); err != nil {
			return fmt.Errorf("nemesis: %w", err)
		}
	}
	return nil
}

// Injected is a fault in force.
type Injected struct {
	// Targets are the members or clients struck, as recorded.
	Targets []string
	// Params are what Inject learned (resolved targets, roles, leases),
	// added to the entry's in the history; Stop may add more.
	Params map[string]string
	// Kind, if set, is the kind of fault injected when a family plays
	// its entry as another (a lease fault on a lock that tells no lease,
	// played as a pause): the history records it, and the entry's kind as
	// param "scheduled".
	Kind string
	// Hold, if set, replaces waiting out the entry's duration; it returns
	// params to add to the stop event.
	Hold func(ctx context.Context, d time.Duration) map[string]string
	// Stop undoes the fault.
	Stop func(ctx context.Context) error
}

// targets is a phrase's subject: the targets, or the cluster.
func targets(ts []string) string {
	if len(ts) == 0 {
		return "the cluster"
	}
	return strings.Join(ts, ", ")
}
