package nemesis

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/histories"
)

// An aimed schedule opens with the holder's lost release reply and ends
// with its lost acquire reply, a TTL before the end; every fault between
// (its duration and its family's Settle) ends before that.
func TestAimOpensAndEndsWithLostReplies(t *testing.T) {
	cfg := swarmConfig()
	cfg.Time, cfg.TTL = 30*time.Second, 2*time.Second
	r := cfg.WithDefaults().Durations["lost-reply"]
	for seed := int64(1); seed <= 30; seed++ {
		aimed := cfg
		aimed.Aim, aimed.Dense = true, true
		s, err := Generate(seed, aimed)
		if err != nil {
			t.Fatal(err)
		}
		first, inner, last := s.Entries[0], between(t, s), s.Entries[len(s.Entries)-1]
		for _, e := range []Entry{first, last} {
			if e.Target != TargetHolder || !slices.Contains(cfg.Clients, e.Fallback) || e.Duration < r.Min || e.Duration > r.Max {
				t.Errorf("seed %d: %+v", seed, e)
			}
		}
		if first.Fault != LostReplyRelease || first.At != 500*time.Millisecond || first.Params["hold_next"] != "500ms" {
			t.Errorf("seed %d: first entry %+v", seed, first)
		}
		if last.Fault != LostReplyAcquire || last.At != 28*time.Second {
			t.Errorf("seed %d: last entry %+v", seed, last)
		}
		for _, e := range inner {
			f, _ := familyOf(e.Fault)
			if e.At < first.At+first.Duration || e.At+f.Spec().Settle+e.Duration > last.At {
				t.Errorf("seed %d: %s at %s (%s, settle %s) is not between the lost replies", seed, e.Fault, e.At, e.Duration, f.Spec().Settle)
			}
		}
		if err := s.Validate(); err != nil {
			t.Errorf("seed %d: %v", seed, err)
		}
	}
	// No lost replies offered: neither.
	cfg.Aim, cfg.Faults = true, []string{"pause", "isolate"}
	s, _ := Generate(1, cfg)
	for _, e := range s.Entries {
		if e.Fault == LostReplyAcquire || e.Fault == LostReplyRelease {
			t.Errorf("lost reply %+v drawn from pause and isolate", e)
		}
	}
}

// between are the entries of an aimed schedule between the lost replies it
// opens and ends with.
func between(t *testing.T, s Schedule) []Entry {
	t.Helper()
	n := len(s.Entries)
	if n < 2 || s.Entries[0].Fault != LostReplyRelease || s.Entries[n-1].Fault != LostReplyAcquire {
		t.Fatalf("schedule %+v does not open and end with lost replies", s.Entries)
	}
	return s.Entries[1 : n-1]
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
		for i, e := range between(t, s) {
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

// An entry that strikes on time ends the fault before it that is still in
// force at its At, which would else keep it out past the run's end.
func TestOnTimeEndsTheFaultBefore(t *testing.T) {
	fc := &fakeClients{names: []string{"c0", "c1"}}
	sched := Schedule{Members: 3, Clients: fc.names, Entries: []Entry{
		{Fault: PauseClient, Target: "c0", Duration: time.Hour},
		{At: 100 * time.Millisecond, Fault: PauseClient, Target: "c1", Duration: time.Millisecond, Params: map[string]string{OnTime: "true"}},
	}}
	rec := newRec()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, Config{}, bare{}, fc, rec, sched)
		done <- err
	}()
	rec.wait(t, histories.FStop, PauseClient, 10*time.Second)
	second := rec.wait(t, histories.FStart, PauseClient, 10*time.Second)
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(second.Value.Targets, []string{"c1"}) {
		t.Errorf("second start: %+v", second.Value)
	}
	var order []string
	for _, op := range rec.all() {
		if op.F == histories.FStart || op.F == histories.FStop {
			order = append(order, op.F+" "+strings.Join(op.Value.Targets, ","))
		}
	}
	if want := []string{"start c0", "stop c0", "start c1", "stop c1"}; !slices.Equal(order, want) {
		t.Errorf("faults %v, want %v", order, want)
	}
}
