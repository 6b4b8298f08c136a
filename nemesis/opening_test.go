package nemesis

import (
	"context"
	"slices"
	"testing"
	"time"
)

// An aimed schedule strikes a queued waiter's lease right after the lost
// release reply it opens with: a revocation where leases can be revoked,
// else a pause of the waiter past its lease (TTL+1 s), aimed behind a
// holder with its section ahead; the rest of the schedule starts after
// it. Without aim, or without a kind that ends a lease, there is none.
func TestAimStrikesAWaiterEarly(t *testing.T) {
	for _, c := range []struct {
		faults []string
		kind   string
		dur    time.Duration
		ahead  string
	}{
		{[]string{All}, LeaseRevoke, 0, "200ms-"},
		{[]string{"lease", "lost-reply", "crash"}, LeaseRevoke, 0, "200ms-"},
		{[]string{"pause", "lost-reply", "crash"}, PauseClient, 3 * time.Second, "2.5s-"},
	} {
		cfg := swarmConfig()
		cfg.Faults, cfg.Time, cfg.TTL = c.faults, 30*time.Second, 2*time.Second
		cfg.Aim, cfg.Dense = true, true
		for seed := int64(1); seed <= 20; seed++ {
			s, err := Generate(seed, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Entries) < 3 {
				t.Fatalf("%v seed %d: %d entries", c.faults, seed, len(s.Entries))
			}
			first, w := s.Entries[0], s.Entries[1]
			if w.Fault != c.kind || w.Target != TargetWaiter || !slices.Contains(cfg.Clients, w.Fallback) ||
				w.Duration != c.dur || w.Params["ahead"] != c.ahead || w.Params["queued"] != "last" || w.At != first.At+first.Duration+500*time.Millisecond {
				t.Errorf("%v seed %d: second entry %+v, want a waiter's %s", c.faults, seed, w, c.kind)
			}
			if c.kind == PauseClient && w.Params["before_write"] != "false" {
				t.Errorf("%v seed %d: waiter's pause %+v armed for a write", c.faults, seed, w)
			}
			if next := s.Entries[2]; next.At < w.At+w.Duration+500*time.Millisecond {
				t.Errorf("%v seed %d: %s at %s, during the waiter's strike", c.faults, seed, next.Fault, next.At)
			}
			if err := s.Validate(); err != nil {
				t.Errorf("%v seed %d: %v", c.faults, seed, err)
			}
		}
	}
	// Not aimed, or no kind that ends a waiter's lease: no such opening.
	for _, c := range []struct {
		faults []string
		aim    bool
	}{{[]string{All}, false}, {[]string{"isolate", "lost-reply", "crash"}, true}} {
		cfg := swarmConfig()
		cfg.Faults, cfg.Aim = c.faults, c.aim
		for seed := int64(1); seed <= 20; seed++ {
			s, _ := Generate(seed, cfg)
			for _, e := range s.Entries {
				if e.Params["opening"] == "waiter" {
					t.Errorf("%v aim %v seed %d: opening %+v", c.faults, c.aim, seed, e)
				}
			}
		}
	}
}

// The waiter's pause an aimed schedule opens with stays on the waiter:
// the first pause of the holder is not swapped into its place
// (holderPauseFirst), nor is it aimed again.
func TestWaiterOpeningKeepsItsTarget(t *testing.T) {
	cfg := swarmConfig()
	cfg.Faults, cfg.Time, cfg.Aim = []string{"pause", "lost-reply"}, 30*time.Second, true
	holders := 0
	for seed := int64(1); seed <= 20; seed++ {
		s, _ := Generate(seed, cfg)
		w := s.Entries[1]
		if w.Fault != PauseClient || w.Target != TargetWaiter || w.Params["mid_section"] != "" {
			t.Errorf("seed %d: opening %+v", seed, w)
		}
		for _, e := range s.Entries[2:] {
			if e.Fault == PauseClient && e.Target == TargetHolder {
				holders++
			}
		}
	}
	if holders == 0 {
		t.Error("no pause of the holder after the opening: nothing to swap")
	}
}

// A fault on a waiter with param queued=last strikes the waiter queued
// last, which has the most of its acquire's time left; without it, the
// one queued first.
func TestQueuedLastStrikesTheLastWaiter(t *testing.T) {
	for _, c := range []struct {
		params map[string]string
		want   string
	}{{map[string]string{"queued": "last", "before_write": "false"}, "c2"}, {map[string]string{"before_write": "false"}, "c1"}} {
		fc := &fakeClients{names: []string{"c0", "c1", "c2"}, holder: "c0", waiter: "c1", lastWaiter: "c2"}
		env := &Env{Sys: leasing{}, Clients: fc, TTL: 2 * time.Second}
		e := Entry{Fault: PauseClient, Target: TargetWaiter, Fallback: "c0", Duration: 3 * time.Second, Params: c.params}
		inj, err := pause{}.Inject(context.Background(), env, e)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(inj.Targets, []string{c.want}) || inj.Params["queued"] != c.params["queued"] {
			t.Errorf("params %v: struck %v (params %v), want %s", c.params, inj.Targets, inj.Params, c.want)
		}
	}
}

// An aimed schedule on a system with lost replies opens with two lost
// releases of the holder: the reply lost, first, and after the waiter's
// strike the request lost too (param request), its next section held open
// as the first's is; each after the one before it.
func TestAimLosesAReleaseRequest(t *testing.T) {
	cfg := swarmConfig()
	cfg.Time, cfg.TTL, cfg.Aim, cfg.Dense = 30*time.Second, 2*time.Second, true, true
	r := cfg.WithDefaults().Durations["lost-reply"]
	for seed := int64(1); seed <= 20; seed++ {
		s, _ := Generate(seed, cfg)
		first, w, req := s.Entries[0], s.Entries[1], s.Entries[2]
		if first.Fault != LostReplyRelease || first.Params["request"] != "" || w.Params["opening"] != "waiter" {
			t.Fatalf("seed %d: opens with %+v, %+v", seed, first, w)
		}
		if req.Fault != LostReplyRelease || req.Target != TargetHolder || !slices.Contains(cfg.Clients, req.Fallback) ||
			req.Params["request"] != "lost" || req.Params["hold_next"] != "500ms" || req.Duration < r.Min || req.Duration > r.Max ||
			req.At != w.At+w.Duration+500*time.Millisecond {
			t.Errorf("seed %d: third entry %+v, want the holder's release request lost", seed, req)
		}
		for _, e := range s.Entries[3:] {
			if e.Params["request"] != "" || e.At < req.At+req.Duration {
				t.Errorf("seed %d: %+v after the lost request", seed, e)
			}
		}
	}
	// Without aim, none.
	cfg.Aim = false
	for seed := int64(1); seed <= 20; seed++ {
		s, _ := Generate(seed, cfg)
		for _, e := range s.Entries {
			if e.Params["request"] != "" {
				t.Errorf("seed %d: %+v unaimed", seed, e)
			}
		}
	}
}
