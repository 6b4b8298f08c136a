package nemesis

import (
	"slices"
	"testing"
	"time"
)

// An aimed schedule strikes last with the holder's lost acquire reply, a
// TTL before the end, and every fault before it (its duration and its
// family's Settle) ends before that.
func TestAimStrikesLastWithALostAcquire(t *testing.T) {
	cfg := swarmConfig()
	cfg.Time, cfg.TTL = 30*time.Second, 2*time.Second
	for seed := int64(1); seed <= 30; seed++ {
		aimed := cfg
		aimed.Aim, aimed.Dense = true, true
		s, err := Generate(seed, aimed)
		if err != nil {
			t.Fatal(err)
		}
		last := s.Entries[len(s.Entries)-1]
		if last.Fault != LostReplyAcquire || last.Target != TargetHolder || !slices.Contains(cfg.Clients, last.Fallback) || last.At != 28*time.Second {
			t.Fatalf("seed %d: last entry %+v", seed, last)
		}
		r := aimed.WithDefaults().Durations["lost-reply"]
		if last.Duration < r.Min || last.Duration > r.Max {
			t.Errorf("seed %d: last entry lasts %s, outside %v", seed, last.Duration, r)
		}
		for _, e := range s.Entries[:len(s.Entries)-1] {
			f, _ := familyOf(e.Fault)
			if e.At+f.Spec().Settle+e.Duration > last.At {
				t.Errorf("seed %d: %s at %s (%s, settle %s) runs into the last strike", seed, e.Fault, e.At, e.Duration, f.Spec().Settle)
			}
		}
		if err := s.Validate(); err != nil {
			t.Errorf("seed %d: %v", seed, err)
		}
	}
	// No lost replies offered: no last strike.
	cfg.Aim, cfg.Faults = true, []string{"pause", "isolate"}
	s, _ := Generate(1, cfg)
	for _, e := range s.Entries {
		if e.Fault == LostReplyAcquire {
			t.Errorf("lost acquire reply %+v drawn from pause and isolate", e)
		}
	}
}

// Aimed, every lost release reply strikes the holder's release (the
// client drawn its fallback), and about half the lost renewal replies
// become one.
func TestAimTurnsLostRepliesOnReleases(t *testing.T) {
	cfg := swarmConfig()
	cfg.Faults = []string{"lost-reply"}
	renewed, turned := 0, 0
	for seed := int64(1); seed <= 30; seed++ {
		plain, _ := Generate(seed, cfg)
		aimed := cfg
		aimed.Aim = true
		s, _ := Generate(seed, aimed)
		for i, e := range s.Entries[:len(s.Entries)-1] {
			p := plain.Entries[i]
			switch {
			case p.Fault == LostReplyRenew && e.Fault == LostReplyRenew:
				renewed++
			case p.Fault == LostReplyRenew:
				turned++
				r := aimed.WithDefaults().Durations["lost-reply"]
				if e.Fault != LostReplyRelease || e.Duration < r.Min || e.Duration > r.Max || e.Params["ahead"] != "" {
					t.Errorf("seed %d: %+v turned into %+v", seed, p, e)
				}
			}
			if e.Fault != LostReplyRelease {
				continue
			}
			want := p.Target
			if p.Target == TargetHolder || p.Target == TargetWaiter {
				want = p.Fallback
			}
			if e.Target != TargetHolder || e.Fallback != want || e.Params["hold_next"] != "500ms" {
				t.Errorf("seed %d: %+v aimed as %+v", seed, p, e)
			}
		}
	}
	if renewed == 0 || turned == 0 {
		t.Errorf("%d lost renewal replies turned on releases, %d kept", turned, renewed)
	}
}
