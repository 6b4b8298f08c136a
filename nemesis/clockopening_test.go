package nemesis

import (
	"context"
	"slices"
	"testing"
	"time"
)

// An aimed schedule that offers clock steps and lost replies opens, after
// its other openings, with a waiter's clock stepped TTL+TTL/2 ahead for
// TTL/4, aimed at a holder with work ahead and any waiter however long it
// has waited; the entry after it starts a gap after its end. Without aim,
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
			k.Duration != 500*time.Millisecond || k.Params["delta"] != "3s" || k.Params["ahead"] != "200ms-" || k.Params["waited"] != "" || k.Params["waiter"] != "newest" {
			t.Errorf("seed %d: clock opening %+v, want any waiter's clock 3s ahead for 500ms", seed, k)
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
	fc := &fakeClients{names: []string{"c0", "c1", "c2"}, holder: "c0", waiter: "c2", newest: "c1"}
	inj, err := clockFault{}.Inject(context.Background(), &Env{Clients: fc, TTL: 2 * time.Second}, k)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(inj.Targets, []string{"c1"}) || !slices.Contains(fc.calls, "bump c1 3s") {
		t.Errorf("struck %v (calls %v), want the newest waiter c1", inj.Targets, fc.calls)
	}
}
