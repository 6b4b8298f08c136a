package nemesis

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRegistry checks what every family promises the rest of locktest: a
// unique name and kinds, sane default durations, entries it draws that it
// accepts, and a story phrase naming its targets.
func TestRegistry(t *testing.T) {
	t.Parallel()
	kinds := map[string]string{}
	for _, f := range families {
		if f.Spec().Name == "" || slices.Contains(Categories()[:slices.Index(Categories(), f.Spec().Name)], f.Spec().Name) {
			t.Errorf("family %q: empty or duplicate name", f.Spec().Name)
		}
		if got, ok := family(f.Spec().Name); !ok || got != f {
			t.Errorf("family(%q) does not find it", f.Spec().Name)
		}
		if r := f.Spec().Durations(2 * time.Second); r.Min <= 0 || r.Max < r.Min {
			t.Errorf("%s: default durations %v", f.Spec().Name, r)
		}
		for _, k := range everyKind(f) {
			if other, dup := kinds[k]; dup {
				t.Errorf("kind %s in %s and %s", k, other, f.Spec().Name)
			}
			kinds[k] = f.Spec().Name
			if got, ok := familyOf(k); !ok || got != f {
				t.Errorf("familyOf(%s) is not %s", k, f.Spec().Name)
			}
			if p, ok := Describe(k, []string{"c7"}, nil); !ok || !strings.Contains(p, "c7") {
				t.Errorf("Describe(%s) = %q, %v: want a phrase naming the target", k, p, ok)
			}
		}
		// Every entry the family draws, it accepts.
		cfg := Config{Faults: []string{f.Spec().Name}, Members: 5, Clients: []string{"c0", "c1", "c2"}, Time: 10 * time.Minute}
		s, err := Generate(1, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Entries) == 0 {
			t.Errorf("%s: drew no entries", f.Spec().Name)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("%s: %v", f.Spec().Name, err)
		}
	}
	if _, ok := Describe("no-such-fault", nil, nil); ok {
		t.Error("Describe knows an unknown kind")
	}
}

// bare is a system under test with members and no capability at all.
type bare struct{}

func (bare) Describe() string      { return "a bare system" }
func (bare) MemberNames() []string { return []string{"m0", "m1", "m2"} }
func (bare) Endpoints(string) ([]string, error) {
	return []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}, nil
}
func (bare) LogDir() string { return "" }

func TestRefuseNamesTheMissingCapability(t *testing.T) {
	t.Parallel()
	err := Refuse(bare{}, []string{"clock", "partition"})
	if err == nil || !strings.Contains(err.Error(), "partition") || !strings.Contains(err.Error(), "a bare system") {
		t.Fatalf("Refuse = %v, want an error naming the partition capability and the system", err)
	}
	// Client faults need nothing of the system.
	if err := Refuse(bare{}, []string{"clock"}); err != nil {
		t.Errorf("clock refused: %v", err)
	}
	s := Schedule{Members: 3, Entries: []Entry{{Fault: CrashLeader, Target: TargetLeader, Fallback: "m0", Duration: time.Second}}}
	if err := RefuseSchedule(bare{}, s); err == nil || !strings.Contains(err.Error(), "crash-member") {
		t.Errorf("RefuseSchedule = %v, want crash-member named", err)
	}
	// Run refuses it before recording anything.
	rec := newRec()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, Config{}, bare{}, nil, rec, s); err == nil {
		t.Error("Run carried out a schedule the system cannot")
	}
	if ops := rec.all(); len(ops) != 0 {
		t.Errorf("Run recorded %d events for a refused schedule", len(ops))
	}
}

// A release whose request was lost with its reply never reached the
// server, and its story must not say it did.
func TestDescribeLostRequest(t *testing.T) {
	if p, _ := Describe(LostReplyRelease, []string{"c1"}, map[string]string{"request": "lost"}); p != "c1's release never reached the server: its request was lost, and its reply" {
		t.Errorf("request lost: %q", p)
	}
	// What the fault found at its end: the server answered, or not.
	if p, _ := Describe(LostReplyRelease, []string{"c1"}, map[string]string{"server_answered": "yes"}); p != "c1's release reached the server, which answered, but its reply was lost" {
		t.Errorf("reply lost: %q", p)
	}
	if p, _ := Describe(LostReplyRelease, []string{"c1"}, map[string]string{"server_answered": "no, within 3s after the fault's duration"}); p != "c1's release was sent, and its link was cut before the server answered: whether it took effect is unknown" {
		t.Errorf("cut before the answer: %q", p)
	}
	// Not known (the fault's start, or links the fault cannot read): no
	// claim that it reached the server.
	if p, _ := Describe(LostReplyRelease, []string{"c1"}, nil); p != "c1's release was sent, and its reply was lost" {
		t.Errorf("not known: %q", p)
	}
}
