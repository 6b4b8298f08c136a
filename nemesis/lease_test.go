package nemesis

import (
	"context"
	"slices"
	"testing"
	"time"
)

// leasing is a system with leases that no client's lock tells.
type leasing struct{ prototype }

func (leasing) RevokeLease(context.Context, string) error       { return nil }
func (leasing) LeaseGone(context.Context, string) (bool, error) { return true, nil }

// TestUntoldLeaseFaultWakesTheWaiterInTime plays lease faults on a queued
// waiter whose lock tells no lease (an exec: lock) as a pause a second past
// the TTL, whatever the schedule drew: the waiter's lease ends, and it
// wakes while its acquire still waits (4 s by default), where a grant of
// a waiter whose lease ended in line (etcd#11456) is made. Two TTLs, the
// pause before, woke every waiter to a deadline already past.
func TestUntoldLeaseFaultWakesTheWaiterInTime(t *testing.T) {
	t.Parallel()
	for _, e := range []Entry{
		{Fault: LeaseRevoke, Target: TargetWaiter, Fallback: "c1"},
		{Fault: LeaseStarve, Target: TargetWaiter, Fallback: "c1", Duration: 6 * time.Second},
	} {
		fc := &fakeClients{names: []string{"c0", "c1"}, holder: "c0", waiter: "c1", leases: map[string]string{}}
		env := &Env{Sys: leasing{}, Clients: fc, TTL: 2 * time.Second}
		inj, err := lease{}.Inject(context.Background(), env, e)
		if err != nil {
			t.Fatalf("%s: %v", e.Fault, err)
		}
		want := []string{"pause c1 3s false"}
		if inj.Kind != PauseClient || inj.Params["duration"] != "3s" || !slices.Equal(fc.callList(), want) {
			t.Errorf("%s: played as %q, params %v, calls %v; want a pause of c1 of 3s (%v)", e.Fault, inj.Kind, inj.Params, fc.callList(), want)
		}
	}
}

// TestGenerateWakesPausedWaitersInTime draws a long run's pauses: a queued
// waiter's is past its TTL and at most a second past it, where a holder's
// keeps the family's range (up to two TTLs); durations a user gave are
// kept for waiters too.
func TestGenerateWakesPausedWaitersInTime(t *testing.T) {
	t.Parallel()
	cfg := Config{Faults: []string{"pause"}, Members: 3, Clients: []string{"c0", "c1", "c2"}, Time: 10 * time.Minute, TTL: 2 * time.Second}
	longest := func(cfg Config) map[string]time.Duration {
		s, err := Generate(3, cfg)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]time.Duration{}
		for _, e := range s.Entries {
			if e.Fault != PauseClient {
				continue
			}
			if e.Target == TargetWaiter && e.Duration <= cfg.TTL {
				t.Errorf("a waiter paused %v, within its TTL", e.Duration)
			}
			out[e.Target] = max(out[e.Target], e.Duration)
		}
		return out
	}
	got := longest(cfg)
	if got[TargetWaiter] == 0 || got[TargetWaiter] > 3*time.Second || got[TargetHolder] <= 3*time.Second {
		t.Errorf("longest pauses %v: want a waiter's at most 3s, a holder's longer", got)
	}
	cfg.Durations = map[string]Range{"pause": {Min: 5 * time.Second, Max: 6 * time.Second}}
	if got := longest(cfg); got[TargetWaiter] <= 5*time.Second {
		t.Errorf("with pause=5s-6s, longest pauses %v: want the user's durations for a waiter too", got)
	}
}
