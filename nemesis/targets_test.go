package nemesis

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// An entry aimed at a holder with work ahead strikes the holder entering a
// section of the asked length, not whoever holds the lock now.
func TestAimStrikesAHolderEnteringASlowSection(t *testing.T) {
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

func TestGenerateAimsLeaseFaultsAtSlowSections(t *testing.T) {
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
