package nemesis

import (
	"context"
	"testing"
	"time"
)

// A session lock in a process of its own on a cluster opens its aimed
// schedule with the whole cluster's outage, TTL/2 down, at a fresh queue;
// a lock locktest sees, a system that revokes leases or expires keys early,
// or a lone server, gets none.
func TestOutageOpening(t *testing.T) {
	cfg, ss := sessionSchedules(t)
	for i, s := range ss {
		seed := i + 1
		o := s.Entries[0]
		if o.Fault != CrashMember || o.Target != AllMembers || o.Duration != time.Second ||
			o.Params["fresh"] != "250ms" || o.Params["hold"] != "500ms" || o.Params["opening"] != "outage" || o.At != cfg.WithDefaults().gap() {
			t.Errorf("seed %d: opens with %+v, want the outage", seed, o)
		}
		if next := s.Entries[1]; next.At < o.At+o.Duration {
			t.Errorf("seed %d: %s at %s, during the outage", seed, next.Fault, next.At)
		}
	}
	for _, c := range []struct {
		offers  []string
		members int
		exec    bool
	}{{sessionKinds(), 3, false}, {append(sessionKinds(), LeaseRevoke), 3, true},
		{append(sessionKinds(), ClockJumpEmulated), 3, true}, {sessionKinds(), 1, true}} {
		cfg := swarmConfig()
		cfg.Aim, cfg.OpTimeout, cfg.TTL, cfg.Offers, cfg.UntoldWaiters, cfg.Members = true, 5*time.Second, 2*time.Second, c.offers, c.exec, c.members
		for seed := int64(1); seed <= 20; seed++ {
			s, _ := Generate(seed, cfg)
			for _, e := range s.Entries {
				if e.Params["opening"] == "outage" {
					t.Errorf("%v, %d members, exec %v, seed %d: %+v", c.offers, c.members, c.exec, seed, e)
				}
			}
		}
	}
}

// The outage strikes at a holder still in its section, with less than
// 1.25 TTL of it left, while every waiter has waited less than its param
// fresh; not at a stale queue (even with a fresh waiter at its end), an
// empty one, a holder deep in a slow section, or one whose section is
// over (its release may be on its way), and then strikes anyway (not
// aimed) once the run's end is near.
func TestOutageMoment(t *testing.T) {
	e := Entry{Fault: CrashMember, Target: AllMembers, Params: map[string]string{"fresh": "250ms"}}
	for _, c := range []struct {
		name           string
		waiter, midway string
		waited, left   time.Duration
		newest         time.Duration // c3's wait, if it began last
		aimed          bool
	}{
		{"a holder behind a queue of 100 ms", "c1", "c0", 100 * time.Millisecond, 10 * time.Millisecond, 0, true},
		{"a holder past its section", "c1", "", 100 * time.Millisecond, 0, 0, false},
		{"a waiter of 1 s", "c1", "c0", time.Second, 10 * time.Millisecond, 0, false},
		{"a waiter of 1 s ahead of one of 100 ms", "c1", "c0", time.Second, 10 * time.Millisecond, 100 * time.Millisecond, false},
		{"no waiter", "", "c0", 0, 10 * time.Millisecond, 0, false},
		{"a holder with 2.2 s of its section left", "c1", "c0", 100 * time.Millisecond, 2200 * time.Millisecond, 0, true},
		{"a holder with 3 s of its section left", "c1", "c0", 100 * time.Millisecond, 3 * time.Second, 0, false},
	} {
		// c2 holds the newest grant, its section over.
		fc := &fakeClients{names: []string{"c0", "c1", "c2", "c3"}, holder: "c2", waiter: c.waiter, waited: c.waited, midway: c.midway, left: c.left}
		if c.newest > 0 {
			fc.newest, fc.newestWaited = "c3", c.newest
		}
		env := &Env{Clients: fc, TTL: 2 * time.Second, aimBy: time.Now().Add(50 * time.Millisecond)}
		params := map[string]string{}
		h := env.outageMoment(context.Background(), e, params)
		if (params["aimed"] == "true") != c.aimed || (h == "c0") != c.aimed {
			t.Errorf("%s: %q, %v, want aimed %v", c.name, h, params, c.aimed)
		}
	}
}

// The holder at the outage's moment has its release held until the
// outage's param hold after the cluster is back.
func TestOutageHoldsTheRelease(t *testing.T) {
	const hold = 50 * time.Millisecond
	e := Entry{Fault: CrashMember, Target: AllMembers, Params: map[string]string{"fresh": "250ms", "hold": hold.String()}}
	fc := &fakeClients{names: []string{"c0", "c1"}, holder: "c0", waiter: "c1", waited: time.Second}
	env := &Env{Clients: fc, TTL: 100 * time.Millisecond, aimBy: time.Now().Add(10 * time.Millisecond)}
	params := map[string]string{}
	back := env.outage(context.Background(), e, params)
	h := fc.take()
	if params["held"] != "c0" || h == nil {
		t.Fatalf("the holder's release not held: %v, hook %v", params, h)
	}
	released := make(chan time.Time)
	go func() {
		h.before()
		released <- time.Now()
	}()
	backAt := time.Now()
	back()
	if at := <-released; at.Sub(backAt) < hold {
		t.Errorf("released %s after the cluster was back, want %s or more", at.Sub(backAt), hold)
	}
}

// sessionSchedules are the aimed, dense schedules of seeds 1-20 (the
// first at index 0) of a session lock in a process of its own (30 s runs,
// a TTL of 2 s), each valid, and their config.
func sessionSchedules(t *testing.T) (Config, []Schedule) {
	t.Helper()
	cfg := swarmConfig()
	cfg.Time, cfg.TTL, cfg.OpTimeout = 30*time.Second, 2*time.Second, 5*time.Second
	cfg.Aim, cfg.Dense, cfg.Offers, cfg.UntoldWaiters = true, true, sessionKinds(), true
	var out []Schedule
	for seed := int64(1); seed <= 20; seed++ {
		s, err := Generate(seed, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("seed %d: %v", seed, err)
		}
		out = append(out, s)
	}
	return cfg, out
}
