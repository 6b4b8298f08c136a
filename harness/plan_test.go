package harness

import (
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/backend/registry"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/scenario"
	"github.com/locktest/locktest/system"
	"github.com/locktest/locktest/workload"
)

// backends are the backends the tests plan and check on: locktest's own.
var backends = registry.Backends()

// A run is planned before anything starts, from its backend: the default
// recipe and options, the members, and --nemesis all resolved to the
// families the backend's system offers; what does not fit the backend is
// refused in one line.
func TestPlan(t *testing.T) {
	t.Parallel()
	def := backends.Default()
	o, err := NewPlan(Options{Backends: backends, Workload: workload.DefaultConfig(), Time: time.Second, Nemesis: nemesis.Config{Faults: []string{nemesis.All}}})
	if err != nil {
		t.Fatal(err)
	}
	if o.Backend != def.Name || o.RecipeName != def.Recipes[0].Name || o.System == nil || o.System.Backend() != def.Name || o.Members != 3 {
		t.Errorf("planned %s, recipe %s, options %v, %d members; want the default backend's", o.Backend, o.RecipeName, o.System, o.Members)
	}
	if slices.Contains(o.Nemesis.Faults, nemesis.All) || len(o.Nemesis.Faults) == 0 {
		t.Errorf("--nemesis all planned as %v", o.Nemesis.Faults)
	}
	again, err := NewPlan(o.Options)
	if err != nil || !slices.Equal(again.Nemesis.Faults, o.Nemesis.Faults) || again.Members != o.Members {
		t.Errorf("planning twice: %v, %v", again.Nemesis.Faults, err)
	}

	for _, b := range backends.All() {
		for _, r := range b.Recipes {
			if !r.NoFencingToken {
				continue
			}
			cfg := workload.DefaultConfig()
			cfg.Recipe = r.New()
			o, err := NewPlan(Options{Backends: backends, Workload: cfg, Time: time.Second})
			if err != nil {
				t.Logf("%s not planned: %v (its servers are not installed?)", r.Name, err)
				continue
			}
			if _, ok := o.Workload.Recipe.(lock.Unfenced); !ok || o.Backend != b.Name {
				t.Errorf("%s planned on %s, unfenced %v", r.Name, o.Backend, ok)
			}
		}
	}

	// A plain run's default faults are what its backend offers of them:
	// the lease faults only where there are leases.
	for _, b := range backends.All() {
		cfg := workload.DefaultConfig()
		cfg.Recipe = b.Recipes[0].New()
		o, err := NewPlan(Options{Backends: backends, Workload: cfg, Time: time.Second, DefaultFaults: true,
			Nemesis: nemesis.Config{Faults: []string{"pause", "lease", "isolate"}}})
		if err != nil {
			t.Logf("%s not planned: %v (its servers are not installed?)", b.Name, err)
			continue
		}
		leases := system.Has(o.system.Prototype, system.CapLeases)
		if slices.Contains(o.Nemesis.Faults, "lease") != leases || !slices.Contains(o.Nemesis.Faults, "pause") {
			t.Errorf("%s (leases %v): default faults planned as %v", b.Name, leases, o.Nemesis.Faults)
		}

		// A family it cannot carry out, asked for by name, is refused
		// by name before anything starts.
		for _, f := range nemesis.Categories() {
			o, err := NewPlan(Options{Backends: backends, Workload: cfg, Time: time.Second, Nemesis: nemesis.Config{Faults: []string{f}}})
			switch {
			case err == nil && len(nemesis.Offering([]string{f}, nemesis.Offered(o.system.Prototype))) == 0:
				t.Errorf("%s planned with --nemesis %s, which its system does not offer", b.Name, f)
			case err != nil && (!strings.Contains(err.Error(), "--nemesis: fault "+f+" needs ") || !strings.Contains(err.Error(), "which "+b.Name+" does not offer")):
				t.Errorf("%s with --nemesis %s: %v", b.Name, f, err)
			}
		}
		if leases {
			continue
		}
		if _, err := NewPlan(Options{Backends: backends, Workload: cfg, Time: time.Second, Nemesis: nemesis.Config{Faults: []string{"lease"}}}); err == nil {
			t.Errorf("%s, without leases, planned with --nemesis lease", b.Name)
		}
	}

	for _, other := range backends.All()[1:] {
		cfg := workload.DefaultConfig()
		cfg.Recipe = other.Recipes[0].New()
		_, err := NewPlan(Options{Backends: backends, Workload: cfg, System: def.Defaults(), Time: time.Second})
		if err == nil || !strings.Contains(err.Error(), "runs on "+other.Name) {
			t.Errorf("%s's recipe with %s's options: %v", other.Name, def.Name, err)
		}
		for _, r := range def.Resources {
			_, err := NewPlan(Options{Backends: backends, Workload: cfg, Resource: r.Mode, Time: time.Second})
			if err == nil || !strings.Contains(err.Error(), "--resource "+string(r.Mode)) {
				t.Errorf("%s's recipe with %s's resource %s: %v", other.Name, def.Name, r.Mode, err)
			}
		}
	}
}

// A plan is computed from the options and leaves them as they were (Run
// takes them by value, and a caller may plan the same options again, with
// another seed); its required checks are expanded as --require's are.
func TestNewPlanLeavesOptions(t *testing.T) {
	t.Parallel()
	o := Options{Backends: backends, Workload: workload.DefaultConfig(), Time: time.Second, Required: []string{"all"},
		Nemesis: nemesis.Config{Faults: []string{nemesis.All}}}
	p, err := NewPlan(o)
	if err != nil {
		t.Fatal(err)
	}
	if o.Backend != "" || o.Members != 0 || o.System != nil || o.Workload.Recipe != nil || o.Quiet != 0 ||
		!slices.Equal(o.Nemesis.Faults, []string{nemesis.All}) || !slices.Equal(o.Required, []string{"all"}) {
		t.Errorf("planning changed its options: %+v", o)
	}
	if !slices.Equal(p.Required, slices.Sorted(slices.Values(checker.Names()))) || p.Quiet != DefaultQuiet || p.LivenessBound != DefaultLivenessBound {
		t.Errorf("planned required %v, quiet %v, liveness bound %v; want every check, the defaults", p.Required, p.Quiet, p.LivenessBound)
	}
	if _, err := NewPlan(Options{Backends: backends, Workload: workload.DefaultConfig(), Time: time.Second, Required: []string{"mutexx"}}); err == nil {
		t.Error("a required check that is no check's was planned")
	}
}

// A scenario about an adapter of a real library names it by its exec spec
// and its backend: Apply runs it on that backend; an exec spec without one
// is refused.
func TestApplyExecRecipe(t *testing.T) {
	t.Parallel()
	spec := "exec:/bin/cat adapter"
	o := Options{Backends: backends, Workload: workload.DefaultConfig()}
	if err := o.Apply(scenario.Settings{Recipe: spec, Backend: "redis"}); err != nil {
		t.Fatal(err)
	}
	if o.Backend != "redis" || o.Workload.Recipe == nil || o.Workload.Recipe.Name() != spec {
		t.Errorf("applied: backend %q, recipe %v", o.Backend, o.Workload.Recipe)
	}
	o = Options{Backends: backends, Workload: workload.DefaultConfig()}
	if err := o.Apply(scenario.Settings{Recipe: spec}); err == nil || !strings.Contains(err.Error(), "with its backend") {
		t.Errorf("an exec recipe without its backend: %v", err)
	}
}

// The fault schedule is drawn in planning, against the members the
// backend names and the clients the workload will: a plan of the same
// options draws the same one, and a started system whose members are not
// those planned is refused before anything is recorded.
func TestPlanDrawsTheSchedule(t *testing.T) {
	t.Parallel()
	o := Options{Backends: backends, Workload: workload.DefaultConfig(), Time: 30 * time.Second, Members: 5,
		Nemesis: nemesis.Config{Faults: []string{nemesis.All}}}
	o.Workload.Seed = 7
	p, err := NewPlan(o)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.system.Members, []string{"m0", "m1", "m2", "m3", "m4"}) || p.schedule == nil || len(p.schedule.Entries) == 0 {
		t.Fatalf("planned members %q, schedule %v", p.system.Members, p.schedule)
	}
	if !slices.Equal(p.schedule.Clients, workload.ClientNames(o.Workload.Clients)) || p.schedule.Members != 5 {
		t.Errorf("schedule for clients %q and %d members", p.schedule.Clients, p.schedule.Members)
	}
	for _, e := range p.schedule.Entries {
		for _, m := range []string{e.Target, e.Fallback} {
			if strings.HasPrefix(m, "m") && !slices.Contains(p.system.Members, m) {
				t.Errorf("%s strikes %q, no planned member", e.Fault, m)
			}
		}
	}
	again, err := NewPlan(o)
	if err != nil || !reflect.DeepEqual(again.schedule, p.schedule) {
		t.Errorf("planning the same options again drew another schedule (%v)", err)
	}
	if err := p.agrees([]string{"m0", "m1", "m2", "m3", "m4"}); err != nil {
		t.Errorf("the planned members: %v", err)
	}
	for _, started := range [][]string{{"m0", "m1", "m2"}, {"m0", "m1", "m2", "m3", "x"}} {
		if err := p.agrees(started); err == nil {
			t.Errorf("members %q started for a plan of %q: not refused", started, p.system.Members)
		}
	}
	// A member the plan cannot name (an external cluster's own) is the
	// system's to name.
	p.system.Members = []string{"", "", "", "", ""}
	if err := p.agrees([]string{"a", "b", "c", "d", "e"}); err != nil {
		t.Errorf("an external cluster's names: %v", err)
	}
}

// A scenario's schedule may need a system other than the one its options
// alone plan (failover-redis: a replica and Sentinel, for its failover):
// the run's system, against which its schedule is checked before anything
// starts and which Run starts, is the one planned for the schedule.
func TestPlanStagesTheScenarioSystem(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed (apt-get install redis-server)")
	}
	sc, err := backends.Catalog().Lookup("failover-redis")
	if err != nil {
		t.Fatal(err)
	}
	o, err := Play(Options{Backends: backends, Workload: workload.DefaultConfig()}, sc)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(o)
	if err != nil {
		t.Fatalf("the scenario was not planned: %v", err)
	}
	if !system.Has(p.system.Prototype, system.CapFailover) || len(p.system.Members) != p.Members || p.system.Plan.Members != p.Members || p.Members < 2 {
		t.Errorf("planned %q (%d members), offering failover %v: not the replicated system its schedule needs",
			p.system.Members, p.Members, system.Has(p.system.Prototype, system.CapFailover))
	}
}
