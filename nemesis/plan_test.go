package nemesis

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// One schedule for etcd and Redis: an etcd system with every kind gets it
// unchanged; a single Redis server gets each member fault on its one
// server, and the faults it cannot carry out dropped, not lost silently.
func TestFit(t *testing.T) {
	t.Parallel()
	// As harness.DrawSchedule draws one for every backend.
	cfg := Config{Faults: []string{"pause", "lease", "crash", "isolate"}, Members: 3, MemberLinks: "etcd",
		Clients: []string{"c0", "c1", "c2", "c3", "c4"}, TTL: 2 * time.Second, Time: 60 * time.Second}
	s, err := Generate(4, cfg)
	if err != nil {
		t.Fatal(err)
	}
	same, dropped := fit(s, nil, []string{"m0", "m1", "m2"})
	if !reflect.DeepEqual(same, s) || len(dropped) != 0 {
		t.Errorf("fitting to the system it was drawn for changed it: %d dropped", len(dropped))
	}

	redis := func(k string) bool { return !strings.HasPrefix(k, "lease") && k != CrashLeader }
	var offers []string
	for _, f := range Families() {
		offers = append(offers, slices.DeleteFunc(f.Spec().KindNames(), func(k string) bool { return !redis(k) })...)
	}
	fitted, dropped := fit(s, offers, []string{"r0"})
	if len(fitted.Entries)+len(dropped) != len(s.Entries) || len(dropped) == 0 || len(fitted.Entries) == 0 {
		t.Fatalf("%d kept and %d dropped of %d", len(fitted.Entries), len(dropped), len(s.Entries))
	}
	if err := fitted.Validate(); err != nil || fitted.Members != 1 {
		t.Fatalf("fitted schedule for %d members: %v", fitted.Members, err)
	}
	members := 0
	for _, e := range fitted.Entries {
		if !redis(e.Fault) {
			t.Errorf("kept %s, which the system cannot carry out", e.Fault)
		}
		for _, name := range []string{e.Target, e.Fallback} {
			if strings.HasPrefix(name, "m") {
				t.Errorf("%s still targets %s", e.Fault, name)
			}
			if name == "r0" {
				members++
			}
		}
	}
	if members == 0 {
		t.Error("no member fault reached the server")
	}
	crashes := 0 // of the leader, which a Redis server has not
	for _, e := range s.Entries {
		if e.Fault == CrashLeader {
			crashes++
		}
	}
	for _, e := range fitted.Entries {
		if e.Fault == CrashMember && e.Target == TargetLeader {
			crashes--
		}
	}
	if crashes != 0 {
		t.Errorf("%d crashes of the leader did not become crashes of a member", crashes)
	}
	for _, e := range dropped {
		if redis(e.Fault) {
			t.Errorf("dropped %s, which the system can carry out", e.Fault)
		}
	}
}

// Plan resolves a run's faults against what its system offers before
// anything starts. On a bare system (no capability: the client faults
// only), all is the families it offers, drawn the same from the same
// seed; a family it cannot carry out is refused by name, naming the
// backend, unless the faults are a plain run's defaults (left out then); a
// family the lock cannot suffer is refused by name, and left out of all;
// a replayed schedule of another size is refused, unless it is to be
// fitted.
func TestPlan(t *testing.T) {
	t.Parallel()
	ask := func(faults ...string) Ask {
		cfg := Config{Faults: faults, Members: 3, MemberNames: []string{"m0", "m1", "m2"}, Clients: []string{"c0", "c1"}, Time: 30 * time.Second}
		return Ask{Config: cfg, Seed: 1, System: bare{}, Backend: "bare"}
	}
	all, err := Plan(ask(All))
	if err != nil {
		t.Fatal(err)
	}
	offers := Offered(bare{})
	if want := Expand([]string{All}, offers); len(want) == 0 || slices.Contains(want, "partition") || !slices.Equal(all.Config.Faults, want) {
		t.Errorf("all planned as %v, want %v", all.Config.Faults, want)
	}
	if all.Schedule == nil || len(all.Schedule.Entries) == 0 || !slices.Equal(all.Families, all.Config.Faults) {
		t.Fatalf("schedule %v, families %v", all.Schedule, all.Families)
	}
	for _, e := range all.Schedule.Entries {
		if !slices.Contains(offers, e.Fault) {
			t.Errorf("drew %s, which the system does not offer", e.Fault)
		}
	}
	if again, _ := Plan(ask(All)); !reflect.DeepEqual(again.Schedule, all.Schedule) {
		t.Error("the same seed drew another schedule")
	}

	if _, err := Plan(ask("partition")); err == nil || !strings.Contains(err.Error(), "--nemesis: fault partition needs ") || !strings.Contains(err.Error(), "which bare does not offer") {
		t.Errorf("partition on a bare system: %v", err)
	}
	defaults := ask("partition", "clock")
	defaults.Default = true
	if p, err := Plan(defaults); err != nil || !slices.Equal(p.Config.Faults, []string{"clock"}) {
		t.Errorf("default faults planned as %v (%v), want clock alone", p.Config.Faults, err)
	}

	noClock := func(family string) string {
		if family == "clock" {
			return "no clock of its own"
		}
		return ""
	}
	limited := ask("clock")
	limited.Refuses = noClock
	if _, err := Plan(limited); err == nil || err.Error() != "--nemesis clock: no clock of its own" {
		t.Errorf("a family the lock cannot suffer: %v", err)
	}
	limited = ask(All)
	limited.Refuses = noClock
	p, err := Plan(limited)
	if err != nil || slices.Contains(p.Config.Faults, "clock") || slices.ContainsFunc(p.Config.Offers, func(k string) bool { return FamilyOf(k) == "clock" }) {
		t.Errorf("all for a lock without clock faults: %v, offers %v (%v)", p.Config.Faults, p.Config.Offers, err)
	}

	other := *all.Schedule
	other.Members = 5
	replay := ask()
	replay.Schedule = &other
	if _, err := Plan(replay); err == nil || err.Error() != "the schedule is for 5 members, the run has 3" {
		t.Errorf("a schedule of another size: %v", err)
	}
	replay.Fit = true
	if p, err := Plan(replay); err != nil || p.Schedule == nil || p.Schedule.Members != 3 {
		t.Errorf("fitted: %v (%v)", p.Schedule, err)
	}
}
