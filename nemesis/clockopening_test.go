package nemesis

import (
	"context"
	"slices"
	"testing"
	"time"
)

// An aimed schedule that offers clock steps and lost replies opens, after
// its other openings, with a waiter's clock stepped TTL+TTL/2 ahead for
// TTL/4, aimed at a holder with work ahead and the waiter that began to
// wait last once it has waited under TTL/2; the entry after it starts a
// gap after its end. Without aim,
// without clock faults, or without lost replies, there is none.
func TestAimStepsAWaitersClockAhead(t *testing.T) {
	cfg := swarmConfig()
	cfg.Time, cfg.TTL = 30*time.Second, 2*time.Second
	cfg.Aim, cfg.Dense = true, true
	for seed := int64(1); seed <= 20; seed++ {
		s, err := Generate(seed, cfg)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(s.Entries, func(e Entry) bool { return e.Params["opening"] == "clock" })
		if i < 0 {
			t.Fatalf("seed %d: no clock opening in %+v", seed, s.Entries)
		}
		for _, e := range s.Entries[:i] {
			if e.Params["opening"] == "" && e.Fault != LostReplyRelease {
				t.Errorf("seed %d: %s before the clock opening, which follows the other openings", seed, e.Fault)
			}
		}
		k := s.Entries[i]
		if k.Fault != ClockBump || k.Target != TargetWaiter || !slices.Contains(cfg.Clients, k.Fallback) ||
			k.Duration != 500*time.Millisecond || k.Params["delta"] != "3s" || k.Params["ahead"] != "200ms-" || k.Params["waited"] != "1s" || k.Params["waiter"] != "newest" {
			t.Errorf("seed %d: clock opening %+v, want the newest waiter's clock 3s ahead for 500ms, once it waited under 1s", seed, k)
		}
		if i+1 < len(s.Entries) {
			if next := s.Entries[i+1]; next.At < k.At+k.Duration+500*time.Millisecond {
				t.Errorf("seed %d: %s at %s, during the clock opening", seed, next.Fault, next.At)
			}
		}
		if err := s.Validate(); err != nil {
			t.Errorf("seed %d: %v", seed, err)
		}
	}
	noOpening(t, "clock", []aimedFaults{{[]string{All}, false}, {[]string{"pause", "lost-reply"}, true}, {[]string{"clock", "pause"}, true}})
}

// The clock opening strikes the client that began to wait last, not the
// one waiting longest (whose acquire a step past its timeout would end).
func TestClockOpeningStrikesTheNewestWaiter(t *testing.T) {
	k, ok := Config{Aim: true, Clients: []string{"c0", "c1", "c2"}, TTL: 2 * time.Second}.clockOpening(1, []Family{clockFault{}})
	if !ok {
		t.Fatal("no clock opening")
	}
	delete(k.Params, "ahead") // no section to aim at here
	// c1 has waited under the opening's 1 s (param waited): its moment is
	// now, not after aimWait's ten seconds of looking.
	fc := &fakeClients{names: []string{"c0", "c1", "c2"}, holder: "c0", waiter: "c2", newest: "c1", newestWaited: 100 * time.Millisecond}
	inj, err := clockFault{}.Inject(context.Background(), &Env{Clients: fc, TTL: 2 * time.Second}, k)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(inj.Targets, []string{"c1"}) || !slices.Contains(fc.calls, "bump c1 3s") || inj.Params["aimed"] != "true" {
		t.Errorf("struck %v (calls %v, params %v), want the newest waiter c1, aimed", inj.Targets, fc.calls, inj.Params)
	}
}

// Where no lease can be revoked, the clock opening goes first, before the
// lost release reply and the waiter's strike: last, behind their waits,
// it came 20-23 s into a 30 s run. Where leases can be revoked it stays
// after the other openings (TestAimStepsAWaitersClockAhead).
func TestClockOpeningFirstWithoutRevocations(t *testing.T) {
	cfg := swarmConfig()
	cfg.Faults, cfg.Time, cfg.TTL, cfg.Aim, cfg.Dense = []string{"pause", "lost-reply", "clock"}, 30*time.Second, 2*time.Second, true, true
	for seed := int64(1); seed <= 20; seed++ {
		s, _ := Generate(seed, cfg)
		k, lost, w := s.Entries[0], s.Entries[1], s.Entries[2]
		if k.Params["opening"] != "clock" || lost.Fault != LostReplyRelease || lost.Target != TargetHolder || w.Params["opening"] != "waiter" {
			t.Errorf("seed %d: opens with %+v, want the clock step, the lost release reply, the waiter's strike", seed, s.Entries[:3])
		}
		if lost.At != k.At+k.Duration+500*time.Millisecond {
			t.Errorf("seed %d: the lost release reply at %s, not right after the clock step", seed, lost.At)
		}
	}
}

// The clock opening waits, while a holder has work ahead, for the newest
// waiter to have waited under param waited, and steps its clock then.
func TestClockOpeningWaitsForAFreshNewest(t *testing.T) {
	k, _ := Config{Aim: true, Clients: []string{"c0", "c1", "c2"}, TTL: 2 * time.Second}.clockOpening(1, []Family{clockFault{}})
	q := &staleNewest{fakeClients: &fakeClients{names: []string{"c0", "c1", "c2"}, holder: "c0", midway: "c0", left: time.Second,
		waiter: "c2", newest: "c1", newestWaited: 3 * time.Second}, n: 4}
	inj, err := clockFault{}.Inject(context.Background(), &Env{Clients: q, TTL: 2 * time.Second}, k)
	if err != nil {
		t.Fatal(err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !slices.Equal(inj.Targets, []string{"c1"}) || inj.Params["aimed"] != "true" || q.newestWaited != 100*time.Millisecond {
		t.Errorf("struck %v (params %v) with the newest waiter having waited %s, want c1 once fresh", inj.Targets, inj.Params, q.newestWaited)
	}
}
