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
