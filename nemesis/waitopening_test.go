package nemesis

import (
	"context"
	"slices"
	"testing"
	"time"
)

// An aimed schedule that offers slow links ends its openings with the
// long-wait strike: the resource link of a waiter that has waited a TTL,
// slowed by 3/4 TTL for three TTLs; an unaimed one has none.
func TestAimSlowsALongWaitersSection(t *testing.T) {
	cfg := swarmConfig()
	cfg.Time, cfg.TTL, cfg.Aim, cfg.Dense = 30*time.Second, 2*time.Second, true, true
	for seed := int64(1); seed <= 20; seed++ {
		s, _ := Generate(seed, cfg)
		i := slices.IndexFunc(s.Entries, func(e Entry) bool { return e.Params["opening"] == "long-wait" })
		if i < 0 {
			t.Fatalf("seed %d: no long-wait opening in %+v", seed, s.Entries)
		}
		w := s.Entries[i]
		if w.Fault != Slow || w.Target != TargetWaiter || !slices.Contains(cfg.Clients, w.Fallback) || w.Duration != 6*time.Second ||
			w.Params["link"] != linkResource || w.Params["latency"] != "1.5s" || w.Params["queued"] != "2s" {
			t.Errorf("seed %d: long-wait opening %+v", seed, w)
		}
		if i+1 < len(s.Entries) && s.Entries[i+1].Params["opening"] != "" {
			t.Errorf("seed %d: opening %+v after the long-wait one", seed, s.Entries[i+1])
		}
	}
	cfg.Aim = false
	for seed := int64(1); seed <= 20; seed++ {
		s, _ := Generate(seed, cfg)
		if slices.ContainsFunc(s.Entries, func(e Entry) bool { return e.Params["queued"] != "" }) {
			t.Errorf("seed %d: a long-wait strike unaimed", seed)
		}
	}
}

// Param queued picks a waiter only once it has waited that long; with
// none that long within the aim's wait the fault is not aimed, and takes
// the waiter its selector finds.
func TestQueuedWaiter(t *testing.T) {
	fc := &fakeClients{names: []string{"c0", "c1"}, holder: "c0", waiter: "c1", waited: 3 * time.Second}
	env := &Env{Clients: fc, TTL: 2 * time.Second}
	e := Entry{Fault: Slow, Target: TargetWaiter, Fallback: "c0", Params: map[string]string{"queued": "2s"}}
	params := map[string]string{}
	if got, err := env.findClient(context.Background(), e, params, false); err != nil || got != "c1" || params["aimed"] != "true" {
		t.Errorf("a waiter of 3s for queued 2s: %q, %v, params %v", got, err, params)
	}
	fc.waited = time.Second
	env.aimBy = time.Now().Add(50 * time.Millisecond)
	params = map[string]string{}
	got, err := env.findClient(context.Background(), e, params, false)
	if err != nil || params["aimed"] != "" {
		t.Errorf("a waiter of 1s for queued 2s: %q, %v, params %v", got, err, params)
	}
	if err := (Entry{Fault: Slow, Target: "c1", Params: map[string]string{"queued": "2s"}}).validate(3); err == nil {
		t.Error("param queued on a fault not aimed at a waiter validated")
	}
}
