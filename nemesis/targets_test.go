package nemesis

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// An entry aimed at a holder with work ahead strikes the holder entering a
// section of the asked length, not whoever holds the lock now.
func TestAimStrikesAHolderEnteringASlowSection(t *testing.T) {
	t.Parallel()
	fc := &fakeClients{names: []string{"c0", "c1", "c2"}, holder: "c0", entering: "c2", think: 3 * time.Second}
	env := &Env{Clients: fc}
	e := Entry{Fault: Isolate, Target: TargetHolder, Fallback: "c1", Params: map[string]string{"ahead": "2.5s-"}}
	params := map[string]string{}
	got, err := env.resolveClient(context.Background(), e, params, true)
	if err != nil || got != "c2" || params["aimed"] != "true" {
		t.Fatalf("aimed at %q (%v), params %v; want c2, aimed", got, err, params)
	}

	// A bounded range skips a section too long for it; when the run ends
	// while it waits, the fault strikes nobody.
	e.Params["ahead"] = "500ms-1.5s"
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	params = map[string]string{}
	if got, err := env.resolveClient(ctx, e, params, false); !errors.Is(err, errNotStruck) || params["aimed"] != "" {
		t.Fatalf("struck %q (%v), params %v; want nobody", got, err, params)
	}
}

// An unbounded aim strikes a holder already mid-section with enough of it
// left, at once, rather than waiting for the next section to begin; a
// bounded one waits for a section entering with a think time in range.
func TestAimStrikesAHolderMidSection(t *testing.T) {
	t.Parallel()
	fc := &fakeClients{names: []string{"c0", "c1", "c2"}, holder: "c0", midway: "c2", left: 3 * time.Second}
	env := &Env{Clients: fc}
	e := Entry{Fault: Isolate, Target: TargetHolder, Fallback: "c1", Params: map[string]string{"ahead": "2.5s-"}}
	params := map[string]string{}
	if got, err := env.resolveClient(context.Background(), e, params, true); err != nil || got != "c2" || params["aimed"] != "true" {
		t.Fatalf("aimed at %q (%v), params %v; want c2, aimed", got, err, params)
	}
	for _, ahead := range []string{"3.5s-", "500ms-4s"} {
		e.Params["ahead"] = ahead
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		params = map[string]string{}
		if got, err := env.resolveClient(ctx, e, params, false); !errors.Is(err, errNotStruck) || params["aimed"] != "" {
			t.Errorf("ahead %s: struck %q (%v), params %v; want nobody", ahead, got, err, params)
		}
		cancel()
	}
}

// An aimed fault whose moment has not come by the time it must strike to
// fit in the run's fault phase strikes the holder its selector finds: an
// 8 s run of aimed faults, none of whose moments came, struck nothing (a
// test of an external cluster asking for a client fault, on a loaded
// machine).
func TestAimGivesWayAtTheRunsEnd(t *testing.T) {
	t.Parallel()
	fc := &fakeClients{names: []string{"c0", "c1", "c2"}, holder: "c0"}
	env := &Env{Clients: fc, aimBy: time.Now().Add(-time.Second)}
	e := Entry{Fault: Isolate, Target: TargetHolder, Fallback: "c1", Params: map[string]string{"ahead": "2.5s-"}}
	// The fault phase's end, before aimWait: an aim that waits for it
	// strikes nobody.
	ctx, cancel := context.WithTimeout(context.Background(), aimWait/2)
	defer cancel()
	params := map[string]string{}
	if got, err := env.resolveClient(ctx, e, params, false); err != nil || got != "c0" || params["aimed"] != "" {
		t.Fatalf("struck %q (%v), params %v; want c0, the holder, not aimed", got, err, params)
	}
}

func TestGenerateAimsLeaseFaultsAtSlowSections(t *testing.T) {
	t.Parallel()
	cfg := Config{Faults: []string{"isolate", "lease", "clock"}, Members: 3, Clients: []string{"c0", "c1", "c2"}, Time: 10 * time.Minute, TTL: 2 * time.Second}
	s, err := Generate(7, cfg)
	if err != nil {
		t.Fatal(err)
	}
	aimed := map[string]bool{}
	for _, e := range s.Entries {
		a, ok := e.Params["ahead"]
		if ok != (e.Target == TargetHolder) {
			t.Errorf("entry %+v: ahead %q with target %s", e, a, e.Target)
		}
		if ok {
			aimed[e.Fault] = true
			lo, hi, err := parseAhead(a)
			if err != nil {
				t.Fatal(err)
			}
			switch e.Fault {
			case Isolate, LeaseStarve:
				if lo <= cfg.TTL || hi != 0 {
					t.Errorf("%s aimed at %s: want sections longer than the TTL", e.Fault, a)
				}
			case ClockBump, ClockRate, ClockStrobe:
				if lo <= 0 || hi >= cfg.TTL {
					t.Errorf("%s aimed at %s: want sections the clock guard lets write", e.Fault, a)
				}
			}
		}
	}
	for _, k := range []string{Isolate, LeaseStarve, LeaseRevoke, ClockRate} {
		if !aimed[k] {
			t.Errorf("no %s aimed at a slow section in %d entries", k, len(s.Entries))
		}
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidateAhead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		e    Entry
		want string
	}{
		{Entry{Fault: Isolate, Target: "c0", Params: map[string]string{"ahead": "1s-"}}, "target must be holder"},
		{Entry{Fault: Isolate, Target: TargetHolder, Params: map[string]string{"ahead": "1s"}}, "want MIN-MAX"},
		{Entry{Fault: Isolate, Target: TargetHolder, Params: map[string]string{"ahead": "2s-1s"}}, "not a range"},
		{Entry{Fault: Isolate, Target: TargetHolder, Params: map[string]string{"ahead": "x-"}}, "invalid duration"},
	} {
		s := Schedule{Members: 3, Clients: []string{"c0"}, Entries: []Entry{tc.e}}
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error with %q", tc.e.Params, err, tc.want)
		}
	}
}

// stalledClients is a workload whose section begins while the fault's
// poller is held up (a loaded machine), 100 ms into a 300 ms stall.
type stalledClients struct {
	*fakeClients
	mu     sync.Mutex
	began  time.Time // when c2 began its section; zero before
	looked bool
}

func (s *stalledClients) Entering(min, max, within time.Duration) (string, bool) {
	s.mu.Lock()
	first := !s.looked
	s.looked = true
	s.mu.Unlock()
	if first {
		go func() {
			time.Sleep(100 * time.Millisecond)
			s.mu.Lock()
			s.began = time.Now()
			s.mu.Unlock()
		}()
		time.Sleep(300 * time.Millisecond)
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.began.IsZero() || time.Since(s.began) > within {
		return "", false
	}
	return s.fakeClients.Entering(min, max, within)
}

// A section begun while the poller was held up still counts when it looks
// again: with a fixed window of the last 50 ms, a look 200 ms late missed
// it, and the fault waited for another until the run's end.
func TestAimSeesSectionsBegunWhileItWasLate(t *testing.T) {
	t.Parallel()
	fc := &stalledClients{fakeClients: &fakeClients{names: []string{"c0", "c1", "c2"}, entering: "c2", think: 3 * time.Second}}
	env := &Env{Clients: fc}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if h, ok := env.aim(ctx, "2s-"); !ok || h != "c2" {
		t.Errorf("aimed at %q (%v), want c2, which began its section while the poller was late", h, ok)
	}
}

// A script's strike at a grant (param on=grant) waits for the run's first
// grant as long as the fault can still strike, not only freshGrantWait: a
// loaded machine's first grant came late, and the fallback struck a
// waiter. One that finds no holder by then falls back, saying it missed.
func TestStrikeAtGrantWaitsForTheFirstGrant(t *testing.T) {
	t.Parallel()
	fc := &fakeClients{names: []string{"c0", "c1"}, waiter: "c0"}
	env := &Env{Clients: fc}
	e := Entry{Fault: LostReplyAcquire, Target: TargetHolder, Fallback: "c0", Params: map[string]string{"on": "grant"}}
	time.AfterFunc(freshGrantWait+300*time.Millisecond, func() {
		fc.mu.Lock()
		fc.holder = "c1"
		fc.mu.Unlock()
	})
	params := map[string]string{}
	if h, err := env.findClient(context.Background(), e, params, false); err != nil || h != "c1" || params["missed"] != "" {
		t.Fatalf("a grant %v late: got %q, %v, params %v; want c1, not missed", freshGrantWait+300*time.Millisecond, h, err, params)
	}

	fc.mu.Lock()
	fc.holder = ""
	fc.mu.Unlock()
	env.aimBy = time.Now().Add(freshGrantWait + 100*time.Millisecond)
	params = map[string]string{}
	if h, err := env.findClient(context.Background(), e, params, false); err != nil || h != "c0" || params["resolved"] != "fallback" || params["missed"] == "" {
		t.Fatalf("no grant by the fault's last moment: got %q, %v, params %v; want the fallback c0, missed", h, err, params)
	}
}

// A lost release reply struck in a hand-off, when nobody holds the lock,
// waits for the next grant and strikes that holder's release, not the
// fallback's, which a waiter makes only after its own grant.
func TestLostReleaseWaitsForAHolder(t *testing.T) {
	t.Parallel()
	fc := &fakeClients{names: []string{"c0", "c1"}, waiter: "c0"}
	env := &Env{Clients: fc}
	e := Entry{Fault: LostReplyRelease, Target: TargetHolder, Fallback: "c0"}
	time.AfterFunc(freshGrantWait+300*time.Millisecond, func() {
		fc.mu.Lock()
		fc.holder = "c1"
		fc.mu.Unlock()
	})
	params := map[string]string{}
	if h, err := env.findClient(context.Background(), e, params, false); err != nil || h != "c1" || params["resolved"] != "" {
		t.Fatalf("a grant %v after the strike: got %q, %v, params %v; want its holder c1", freshGrantWait+300*time.Millisecond, h, err, params)
	}
}
