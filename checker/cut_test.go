package checker

import (
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/histories"
)

// wholeRun is a run as a current locktest records it: setup promising the
// end event, a fault and its heal, two clients that take turns, a final
// read, the observer's last event, the end.
func wholeRun(setup map[string]string) *hist {
	params := map[string]string{"end": histories.EndRecorded, "workload": "counter", "ttl": "2"}
	for k, v := range setup {
		params[k] = v
	}
	return (&hist{}).setup(params).clientOf(0, "c0").clientOf(1, "c1").
		fault("pause-client", []string{"c1"}, 100, 300).
		acq(0, "lock", 10, 20, ok, 5).read(0, "lock", 21, 22, ok, 0).write(0, "lock", 23, 24, ok, 5, 1).rel(0, "lock", 25, 26, ok).
		acq(1, "lock", 30, 40, ok, 7).read(1, "lock", 41, 42, ok, 1).write(1, "lock", 43, 44, ok, 7, 2).rel(1, "lock", 45, 46, ok).
		event("heal", 400, nil, nil).
		acq(0, "lock", 500, 510, ok, 9).read(0, "lock", 511, 512, ok, 2).write(0, "lock", 513, 514, ok, 9, 3).rel(0, "lock", 515, 516, ok).
		read(9, "lock", 900, 901, ok, 3).
		event("observed", 950, nil, map[string]string{"revision": "20"}).
		event("end", 960, nil, nil)
}

// upTo keeps the records up to time t (ms): a run killed then.
func upTo(h *hist, t int64) []histories.Op {
	var out []histories.Op
	for _, op := range h.ops() {
		if op.Time <= t*ms {
			out = append(out, op)
		}
	}
	return out
}

// judged runs the checks a cut bears on, then JudgeCut.
func judged(h *History) ([]Result, *Cut) {
	rs := []Result{h.Mutex(Options{}), h.Resource(Options{}), h.Invariant(), h.Liveness(7 * time.Second), h.Contract(),
		{Name: histories.CheckConsistency, Verdict: Unknown, Explanation: "No member hashes."}}
	return rs, h.JudgeCut(rs, 7*time.Second)
}

func verdictOf(rs []Result, name string) Result {
	for _, r := range rs {
		if r.Name == name {
			return r
		}
	}
	return Result{}
}

func TestWholeRunIsNotCut(t *testing.T) {
	h := Build(wholeRun(nil).ops())
	rs, cut := judged(h)
	if cut != nil {
		t.Fatalf("a whole run judged cut: %+v", cut)
	}
	for _, f := range h.faults() {
		if f.Fault != "pause-client" {
			t.Errorf("the history's faults hold %+v: the end event is no fault", f)
		}
	}
	for _, name := range []string{histories.CheckMutex, histories.CheckResource, histories.CheckInvariant, histories.CheckLiveness} {
		expect(t, verdictOf(rs, name), Valid)
	}
}

// TestCutBeforeHeal: killed during the faults, with a write in flight.
func TestCutBeforeHeal(t *testing.T) {
	h := wholeRun(nil).write(1, "lock", 47, 0, none, 7, 9)
	rs, cut := judged(Build(upTo(h, 350)))
	if cut == nil {
		t.Fatal("a history that stops at 0.35 s, with no end, is not cut short")
	}
	want := "cut short: the history stops at line 22 (0.30 s) without the run's end (no final heal, no observed event, no end event; 1 operation was in flight): what the cut could hide is unknown"
	if cut.Summary != want || cut.Interrupted || cut.InFlight != 1 || cut.Line != 22 {
		t.Errorf("cut %+v\nwant summary %q", cut, want)
	}
	expect(t, verdictOf(rs, histories.CheckLiveness), Unknown, "cut short at 0.30 s, before its final heal")
	expect(t, verdictOf(rs, histories.CheckInvariant), Unknown)
	expect(t, verdictOf(rs, histories.CheckResource), Unknown, "1 write of unknown outcome (1 in flight at the cut)")
	expect(t, verdictOf(rs, histories.CheckConsistency), Unknown, "before the members' hashes were taken")
	expect(t, verdictOf(rs, histories.CheckMutex), Valid)

	// The resource's log settles the write in flight: the resource check
	// judges it, accepted or not.
	for _, applied := range []bool{false, true} {
		hh := Build(upTo(h, 350))
		ws := []AppliedWrite{{Key: "lock", Token: 5, Value: 1}, {Key: "lock", Token: 7, Value: 2}}
		if applied {
			ws = append(ws, AppliedWrite{Key: "lock", Token: 7, Value: 9})
		}
		hh.MarkApplied(ws)
		rs, _ := judged(hh)
		expect(t, verdictOf(rs, histories.CheckResource), Valid)
	}
}

// TestCutInQuiet: killed after the heal, before the final read.
func TestCutInQuiet(t *testing.T) {
	rs, cut := judged(Build(upTo(wholeRun(nil).read(1, "lock", 520, 521, ok, 3), 600)))
	if cut == nil || !strings.Contains(cut.Summary, "(no observed event, no end event)") {
		t.Fatalf("cut %+v", cut)
	}
	expect(t, verdictOf(rs, histories.CheckLiveness), Unknown, "cut short at 0.52 s, 0.12 s after the final heal", "could not be judged")
	// The client's own read after the last write is no final read.
	expect(t, verdictOf(rs, histories.CheckInvariant), Unknown, "before its final reads")
	expect(t, verdictOf(rs, histories.CheckResource), Valid)
}

// TestCutKeepsViolations: what the records show broken stays invalid.
func TestCutKeepsViolations(t *testing.T) {
	// A stale write accepted (of a client that read 0 long before), and a
	// lost update read back.
	h := wholeRun(map[string]string{"resource": "http"}).read(2, "lock", 27, 28, ok, 0).write(2, "lock", 600, 610, ok, 6, 1).read(1, "lock", 620, 630, ok, 1)
	rs, cut := judged(Build(upTo(h, 700)))
	if cut == nil {
		t.Fatal("not cut")
	}
	expect(t, verdictOf(rs, histories.CheckResource), Invalid)
	expect(t, verdictOf(rs, histories.CheckInvariant), Invalid)
}

// TestCutLivenessNoGrant: a lock that granted nothing before the cut is
// broken only if an acquire had waited the bound by then.
func TestCutLivenessNoGrant(t *testing.T) {
	setup := map[string]string{"end": histories.EndRecorded}
	early := (&hist{}).setup(setup).acq(0, "lock", 10, 0, none, 0).acq(1, "lock", 20, 0, none, 0).read(2, "lock", 500, 501, ok, 0)
	rs, _ := judged(Build(early.ops()))
	expect(t, verdictOf(rs, histories.CheckLiveness), Unknown, "The lock granted nothing", "no client asked for longer than the bound")

	late := (&hist{}).setup(setup).acq(0, "lock", 10, 0, none, 0).read(2, "lock", 9000, 9001, ok, 0)
	rs, _ = judged(Build(late.ops()))
	expect(t, verdictOf(rs, histories.CheckLiveness), Invalid, "The lock granted nothing")
}

// TestOlderHistoriesAreNotCut: a history whose setup does not promise the
// end event (recorded before it, or by hand) is judged as before, wherever
// it stops.
func TestOlderHistoriesAreNotCut(t *testing.T) {
	h := wholeRun(map[string]string{"end": ""})
	for _, at := range []int64{350, 600, 2000} {
		if _, cut := judged(Build(upTo(h, at))); cut != nil {
			t.Errorf("stopped at %d ms: judged cut %+v", at, cut)
		}
	}
}

// TestInterruptedRun: an end event that says the run was interrupted.
func TestInterruptedRun(t *testing.T) {
	h := wholeRun(nil)
	ops := upTo(h, 600)
	ops = append(ops, histories.Op{Index: len(ops), Type: histories.Info, F: histories.FEnd, Process: histories.Nemesis, Time: 610 * ms,
		Value: &histories.Value{Params: map[string]string{"interrupted": "true"}}})
	rs, cut := judged(Build(ops))
	if cut == nil || !cut.Interrupted || !strings.HasPrefix(cut.Summary, "cut short: the run was interrupted; its history stops at line") ||
		strings.Contains(cut.Summary, "no end event") {
		t.Fatalf("cut %+v", cut)
	}
	expect(t, verdictOf(rs, histories.CheckLiveness), Unknown)
}

// TestEmptyHistoryIsCut: a run killed as it started leaves an empty file.
func TestEmptyHistoryIsCut(t *testing.T) {
	if cut := Build(nil).Cut(); cut == nil || !strings.Contains(cut.Summary, "the history is empty") {
		t.Fatalf("cut %+v", cut)
	}
}

// TestCutUnsettledByResource: a write of unknown outcome before the cut is
// unsettled on the HTTP store (no log said whether it was accepted), but on
// a resource the system under test keeps (the setup's resource is not
// "http") only writes in flight at the cut are: the others are unknown in a
// whole run too.
func TestCutUnsettledByResource(t *testing.T) {
	for _, c := range []struct {
		resource string
		want     Verdict
	}{{"http", Unknown}, {"", Unknown}, {"etcd-txn", Valid}, {"kept-elsewhere", Valid}} {
		h := wholeRun(map[string]string{"resource": c.resource}).
			acq(1, "lock", 520, 525, ok, 11).write(1, "lock", 530, 540, info, 11, 4).rel(1, "lock", 545, 550, ok)
		rs, cut := judged(Build(upTo(h, 600)))
		if cut == nil {
			t.Fatalf("%q: not cut", c.resource)
		}
		if r := verdictOf(rs, histories.CheckResource); r.Verdict != c.want {
			t.Errorf("resource %q: the check %s, want %s: %s", c.resource, r.Verdict, c.want, r.Explanation)
		}
	}
}
