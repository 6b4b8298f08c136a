package nemesis

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/system"
)

// A Family is one kind of trouble: --nemesis takes its name, and each of its
// kinds is a fault a schedule entry can hold (the value.fault of its
// history events). What it is, is data (Spec); what it does, two methods.
// Adding a family is one file implementing it, plus its line in families.
type Family interface {
	// Spec is the family as data: its name, its kinds and what they need.
	Spec() Spec
	// Draw fills in e, a fault of one of its kinds, from the schedule's
	// generator: its targets, duration (from d) and parameters.
	Draw(g *Gen, e *Entry, d Range)
	// Inject starts e; the fault lasts until the returned Injected's Hold
	// (or e.Duration) is over, and Stop undoes it.
	Inject(ctx context.Context, env *Env, e Entry) (*Injected, error)
}

// Spec is what a family is.
type Spec struct {
	// Name is the family's --nemesis and --fault-durations name.
	Name string
	// Doc says what its faults do, for the generated reference.
	Doc string
	// Kinds are its fault kinds, in the order Generate draws from.
	Kinds []Kind
	// Durations is the default range of its faults' durations, given the
	// lease TTL.
	Durations func(ttl time.Duration) Range
	// Settle is how long, beyond its duration, a fault of the family
	// takes to start and to stop on a real system (measured): a dense
	// schedule counts it in the family's share of the run's time.
	Settle time.Duration
	// OncePerRun: a system carries out its faults once per run, so
	// Generate draws one at most.
	OncePerRun bool
	// ByNameOnly: --nemesis all leaves it out; a run asks for it by name.
	ByNameOnly bool
	// Untargeted: an entry needs no target (else Check refuses one
	// without).
	Untargeted bool
	// DurationParams and NumberParams are the entry params that must
	// parse as durations and as numbers, where present.
	DurationParams, NumberParams []string
}

// Kind is one fault kind of a family.
type Kind struct {
	Name string
	// Needs is what it needs of the system under test.
	Needs []system.Capability
	// Weight is how likely Generate draws it beside its family's other
	// kinds; 0 counts as 1.
	Weight int
	// Clients: it is drawn only in a run with workload clients.
	Clients bool
	// Members is the fewest members it needs; 0 for any number.
	Members int
	// Instant: it strikes once and lasts no time (its entries' Duration
	// is 0), whatever its family's Durations.
	Instant bool
	// Says what it did to its targets, for the checks' stories ("c4 was
	// paused").
	Says func(targets []string, params map[string]string) string
}

// healer is a family that may leave something behind: Heal undoes it, at
// the end of a run, and names the members or clients it restored. Toxics
// on client links are no family's: the runner removes them all.
type healer interface {
	Heal(ctx context.Context, env *Env) (healed []string, err error)
}

// entryChecker is a family whose entries need more than a target and
// well-formed params to be well-formed for a system of members members.
type entryChecker interface {
	Check(e Entry, members int) error
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

// kindsOf lists the kinds of f that apply to a system of members members,
// with or without workload clients.
func kindsOf(f Family, members int, clients bool) []string {
	var out []string
	for _, k := range f.Spec().Kinds {
		if (clients || !k.Clients) && members >= k.Members {
			out = append(out, k.Name)
		}
	}
	return out
}

// everyKind lists every kind of f, whatever the system.
func everyKind(f Family) []string { return f.Spec().KindNames() }

// KindNames lists the names of its kinds.
func (s Spec) KindNames() []string {
	out := make([]string, len(s.Kinds))
	for i, k := range s.Kinds {
		out[i] = k.Name
	}
	return out
}

// kindOf returns the kind called name and its family.
func kindOf(name string) (Kind, Family, bool) {
	for _, f := range families {
		for _, k := range f.Spec().Kinds {
			if k.Name == name {
				return k, f, true
			}
		}
	}
	return Kind{}, nil, false
}

// lacking names what sys lacks to carry out a fault of kind: the one
// place capabilities are matched. It is every capability the kind needs
// when no family has it.
func lacking(sys system.System, kind string) []system.Capability {
	k, _, ok := kindOf(kind)
	if !ok {
		return nil
	}
	return system.Missing(sys, k.Needs)
}

// Needs names what the kinds of family name need of the system under
// test, together; nil for a name no family has.
func Needs(name string) []system.Capability {
	f, ok := family(name)
	if !ok {
		return nil
	}
	var out []system.Capability
	for _, k := range f.Spec().Kinds {
		for _, c := range k.Needs {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// Lacks names what sys lacks to carry out any fault of family name: the
// fewest capabilities missing for one of its kinds; nil when sys can carry
// out some kind of it. Of a name that is a kind's and no family's, what
// sys lacks for that kind; nil for a name of neither.
func Lacks(name string, sys system.System) []system.Capability {
	f, ok := family(name)
	if !ok {
		return lacking(sys, name)
	}
	var fewest []system.Capability
	for _, k := range everyKind(f) {
		miss := lacking(sys, k)
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

// Categories are the names --nemesis accepts, in canonical order.
func Categories() []string {
	out := make([]string, len(families))
	for i, f := range families {
		out[i] = f.Spec().Name
	}
	return out
}

// family returns the family called name.
func family(name string) (Family, bool) {
	for _, f := range families {
		if f.Spec().Name == name {
			return f, true
		}
	}
	return nil, false
}

// familyOf returns the family of a fault kind.
func familyOf(kind string) (Family, bool) {
	_, f, ok := kindOf(kind)
	return f, ok
}

// FamilyOf names the family of a fault kind ("clock" for "clock-rate"); ""
// for a kind no family has.
func FamilyOf(kind string) string {
	if f, ok := familyOf(kind); ok {
		return f.Spec().Name
	}
	return ""
}

// allKinds lists every fault kind.
func allKinds() []string {
	var ks []string
	for _, f := range families {
		ks = append(ks, everyKind(f)...)
	}
	return ks
}

// Describe says in words what a fault of kind, with params, did to its
// targets, for the checks' stories; false for a kind no family knows.
func Describe(kind string, targets []string, params map[string]string) (string, bool) {
	k, _, ok := kindOf(kind)
	if !ok {
		return "", false
	}
	return k.Says(targets, params), true
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
		for _, k := range f.Spec().Kinds {
			if len(sys.MemberNames()) < k.Members {
				continue
			}
			err := system.Refuse(sys, "fault "+k.Name, k.Needs)
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

// Offered are the fault kinds sys can carry out, in canonical order, for
// Config.Offers; never nil.
func Offered(sys system.System) []string {
	out := []string{}
	for _, f := range families {
		for _, k := range everyKind(f) {
			if len(lacking(sys, k)) == 0 {
				out = append(out, k)
			}
		}
	}
	return out
}

// kinds are the kinds of f that Generate may draw.
func (c Config) kinds(f Family, clients bool) []string {
	ks := kindsOf(f, c.Members, clients)
	if c.Offers == nil {
		return ks
	}
	return slices.DeleteFunc(ks, func(k string) bool { return !slices.Contains(c.Offers, k) })
}

// RefuseSchedule is Refuse for the kinds a schedule holds.
func RefuseSchedule(sys system.System, s Schedule) error {
	for _, e := range s.Entries {
		k, _, ok := kindOf(e.Fault)
		if !ok {
			return fmt.Errorf("nemesis: unknown fault kind %q", e.Fault)
		}
		if err := system.Refuse(sys, "fault "+e.Fault, k.Needs); err != nil {
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

// says is Kind.Says for a phrase after the targets ("was paused").
func says(phrase string) func([]string, map[string]string) string {
	return func(ts []string, _ map[string]string) string { return targets(ts) + " " + phrase }
}

// fixed is Spec.Durations for a range that does not depend on the TTL.
func fixed(lo, hi time.Duration) func(time.Duration) Range {
	return func(time.Duration) Range { return Range{lo, hi} }
}
