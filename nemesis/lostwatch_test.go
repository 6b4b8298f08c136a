package nemesis

import (
	"slices"
	"testing"
	"time"
)

// A session lock in a process of its own opens with the lost-watch race:
// a holder entering a short section has its links to the members slowed
// by 3/20 of the TTL, upstream alone, for one acquire of its own; third,
// after the outage and the giving-up cut. None where leases can be revoked, nor for a lock
// whose waiters locktest sees.
func TestLostWatchOpening(t *testing.T) {
	cfg, ss := sessionSchedules(t)
	for i, s := range ss {
		seed := i + 1
		w := s.Entries[2]
		if w.Fault != Slow || w.Target != TargetHolder || !slices.Contains(cfg.Clients, w.Fallback) || w.Duration != 2875*time.Millisecond ||
			w.Params["opening"] != "lost-watch" || w.Params["toxic"] != "latency" || w.Params["latency"] != "300ms" || w.Params["jitter"] != "0s" ||
			w.Params["trip"] != "300ms" || w.Params["ahead"] != "0s-500ms" || w.Params["link"] != "members" {
			t.Errorf("seed %d: opens with %+v, want the lost-watch race", seed, w)
		}
	}
	for _, c := range []struct {
		offers []string
		exec   bool
	}{{sessionKinds(), false}, {append(sessionKinds(), LeaseRevoke), true}} {
		cfg := swarmConfig()
		cfg.Aim, cfg.OpTimeout, cfg.TTL, cfg.Offers, cfg.UntoldWaiters = true, 5*time.Second, 2*time.Second, c.offers, c.exec
		for seed := int64(1); seed <= 20; seed++ {
			s, _ := Generate(seed, cfg)
			for _, e := range s.Entries {
				if e.Params["opening"] == "lost-watch" {
					t.Errorf("%v, exec %v, seed %d: %+v", c.offers, c.exec, seed, e)
				}
			}
		}
	}
}
