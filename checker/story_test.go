package checker

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/histories"
)

// fault adds a nemesis start/stop pair.
func (h *hist) fault(kind string, targets []string, start, stop int64) *hist {
	return h.faultWith(kind, targets, nil, start, stop)
}

// faultWith adds a nemesis start/stop pair with params.
func (h *hist) faultWith(kind string, targets []string, params map[string]string, start, stop int64) *hist {
	v := &histories.Value{Fault: kind, Targets: targets, Params: params}
	h.recs = append(h.recs,
		histories.Op{Type: histories.Info, F: "start", Process: histories.Nemesis, Time: start * ms, Value: v},
		histories.Op{Type: histories.Info, F: "stop", Process: histories.Nemesis, Time: stop * ms, Value: v})
	return h
}

// event adds a nemesis point event.
func (h *hist) event(f string, at int64, targets []string, params map[string]string) *hist {
	h.recs = append(h.recs, histories.Op{Type: histories.Info, F: f, Process: histories.Nemesis, Time: at * ms,
		Value: &histories.Value{Fault: f, Targets: targets, Params: params}})
	return h
}

// clientOf records that client works under process p.
func (h *hist) clientOf(p int, client string) *hist {
	return h.event("process", 0, []string{client}, map[string]string{"process": strconv.Itoa(p)})
}

// pausedHolder is the example: client 4 is paused while holding the
// lock, its lease expires, client 2 acquires, and the unfenced resource
// accepts client 4's stale write when it wakes.
func pausedHolder() *hist {
	return (&hist{}).
		acq(4, "lock", 1000, 1900, ok, 38).
		fault("pause-client", []string{"c4"}, 2950, 4200).
		event("key-deleted", 3100, []string{"c4"}, map[string]string{"key": "lock", "lease": "7587", "revision": "40", "create_revision": "38", "by": "expiry"}).
		acq(2, "lock", 2000, 3200, ok, 41).
		write(2, "lock", 3500, 3600, ok, 41, 1).
		rel(2, "lock", 3700, 3710, ok).
		write(4, "lock", 4220, 4250, ok, 38, 2).
		rel(4, "lock", 4300, 4310, ok)
}

// describePause is a Describer that knows one fault kind, as the nemesis
// knows them all.
func describePause(fault string, targets []string, _ map[string]string) (string, bool) {
	if fault != "pause-client" {
		return "", false
	}
	return strings.Join(targets, ", ") + " was paused", true
}

// described builds a History whose stories word faults with describePause.
func described(ops []histories.Op) *History {
	b := NewBuilder()
	b.Describe = describePause
	for _, op := range ops {
		if err := b.Add(op); err != nil {
			panic(err)
		}
	}
	return b.Finish()
}

func TestStoryPausedHolder(t *testing.T) {
	ops := pausedHolder().ops()
	want := "process 4 acquired token 38 at 1.90 s; c4 was paused 2.95-4.20 s; " +
		"the server deleted process 4's lock key (token 38) at 3.10 s: its lease expired on the server; " +
		"process 2 acquired token 41 at 3.20 s; the resource accepted process 2's write with token 41 at 3.60 s; " +
		"process 2 released the lock at 3.70 s; " +
		"the resource accepted process 4's write with token 38 at 4.25 s, after process 2's write with token 41 at 3.60 s; " +
		"process 4 released the lock at 4.30 s."
	m := described(ops).Mutex(Options{})
	expect(t, m, Invalid, `On key "lock", process 4 and process 2 both believed they held the lock from 3.20 s to 3.70 s: `+want)
	// Without a Describer, or for a kind it does not know, the fault is
	// named generically.
	expect(t, Mutex(ops, Options{}), Invalid, "process 4 acquired token 38 at 1.90 s; fault pause-client on c4 was active 2.95-4.20 s; ")
	slow := pausedHolder().fault("slow", nil, 3000, 3100).ops()
	expect(t, described(slow).Mutex(Options{}), Invalid, "c4 was paused 2.95-4.20 s; fault slow on the cluster was active 3.00-3.10 s; ")
	if len(m.Violations) == 0 || m.Violations[0].Kind != "overlap" {
		t.Fatalf("violations %+v", m.Violations)
	}
	v := m.Violations[0]
	if len(v.Processes) != 2 || v.Processes[0] != 4 || v.Processes[1] != 2 || len(v.Tokens) != 2 || v.Tokens[0] != 38 ||
		len(v.Faults) != 1 || v.Faults[0].Fault != "pause-client" || v.Faults[0].Start != 2950*ms || v.Faults[0].End != 4200*ms {
		t.Errorf("violation %+v", v)
	}
	// With the workload's process events, stories name the clients.
	named := pausedHolder().
		event("process", 0, []string{"c4"}, map[string]string{"process": "4"}).
		event("process", 0, []string{"c1"}, map[string]string{"process": "2"}).ops()
	expect(t, Mutex(named, Options{}), Invalid, `On key "lock", process 4 (c4) and process 2 (c1) both believed they held the lock from 3.20 s to 3.70 s: process 4 (c4) acquired token 38`)
	// A deletion right after a lease-revoke of its owner is told as such.
	revoked := pausedHolder().faultWith("lease-revoke", []string{"c4"}, map[string]string{"lease": "7587"}, 3050, 3060).ops()
	expect(t, Mutex(revoked, Options{}), Invalid, "the server deleted process 4's lock key (token 38) at 3.10 s: the nemesis revoked its lease")
	r := described(ops).Resource(Options{})
	expect(t, r, Invalid, `the resource accepted process 4's write of 2 with token 38 (invoked 4.22 s, accepted 4.25 s), although process 2's write of 1 with the higher token 41 had been accepted by 3.60 s. What happened: process 4 acquired token 38 at 1.90 s; c4 was paused 2.95-4.20 s;`,
		"porcupine needed only history indices")
	if r.Violations[0].Kind != "stale-write" || r.Violations[1].Kind != "not-linearizable" || r.Violations[1].Window == nil {
		t.Errorf("violations %+v", r.Violations)
	}
}

func TestOverlaps(t *testing.T) {
	h := pausedHolder().
		event("lease-lost", 4400, []string{"c4"}, map[string]string{"key": "lock", "token": "38"}).
		acq(5, "other", 0, 10, ok, 50) // never released: held to when last seen
	a := Overlaps(h.ops())
	if len(a.Beliefs) != 3 || len(a.Deletions) != 1 || a.Deletions[0].Token != 38 || a.Deletions[0].By != "expiry" {
		t.Fatalf("analysis %+v", a)
	}
	if len(a.Overlaps) != 1 {
		t.Fatalf("overlaps %+v", a.Overlaps)
	}
	o := a.Overlaps[0]
	if o.First.Process != 4 || o.Second.Process != 2 || o.From != 3200*ms || o.To != 3700*ms || o.First.Ended != "release" {
		t.Errorf("overlap %+v", o)
	}
	// A lease-lost notice does not end the belief: until it releases, the
	// client goes on as the holder, and may still write.
	h = (&hist{}).acq(1, "k", 0, 10, ok, 3).
		event("lease-lost", 20, []string{"c1"}, map[string]string{"key": "k", "token": "3"}).
		acq(2, "k", 5, 30, ok, 4).rel(2, "k", 40, 41, ok).rel(1, "k", 50, 51, fail)
	a = Overlaps(h.ops())
	if len(a.Overlaps) != 1 || a.Beliefs[0].Ended != "release" || a.Beliefs[0].To != 50*ms || a.Overlaps[0].From != 30*ms {
		t.Errorf("lease-lost: %+v", a)
	}
}

func TestLiveness(t *testing.T) {
	const bound = time.Second
	// After the heal at 5 s: p1 gets the lock in 0.5 s; p2 waits from
	// before the heal and gets it 3 s after; p3 never gets it; p4 asks too
	// late to judge.
	h := (&hist{}).
		fault("partition-leader", []string{"m0"}, 1000, 4000).
		event("heal", 5000, nil, nil).
		acq(1, "lock", 5100, 5600, ok, 10).rel(1, "lock", 5700, 5800, ok).
		acq(2, "lock", 3000, 8000, ok, 11).rel(2, "lock", 8100, 8200, ok).
		acq(3, "lock", 6000, 0, none, 0).
		acq(4, "lock", 9500, 0, none, 0).
		read(9, "x", 9900, 10000, ok, 0)
	r := Liveness(h.ops(), bound)
	expect(t, r, Invalid,
		`Process 2 asked for lock "lock" at 5.00 s and had not got it at 6.80 s, 1s after process 1 released it, nobody holding it or granted it in between (bound 1s after the final heal at 5.00 s); it got it only at 8.00 s.`,
		`Process 3 asked for lock "lock" at 6.00 s and had not got it 1s later, at 7.00 s`, "it was still waiting when the history ended at 10.00 s")
	if len(r.Violations) != 2 || strings.Contains(r.Explanation, "Process 1 ") || strings.Contains(r.Explanation, "Process 4 ") {
		t.Errorf("violations %+v", r.Violations)
	}
	// Without a heal, the whole run counts.
	h = (&hist{}).acq(1, "lock", 0, 500, ok, 1).acq(2, "lock", 100, 0, none, 0).read(9, "x", 1900, 2000, ok, 0)
	expect(t, Liveness(h.ops(), bound), Invalid, `Process 2 asked for lock "lock" at 0.10 s`, "the start of the history")
	expect(t, Liveness(h.ops(), 3*time.Second), Valid)
	// Acquires answered before the history ends are judged even when the
	// bound reaches past its end: a run's quiet period can be shorter than
	// the bound.
	h = (&hist{}).event("heal", 1000, nil, nil).
		acq(1, "lock", 1100, 1200, ok, 1).rel(1, "lock", 1300, 1400, ok).
		acq(2, "lock", 1150, 1450, ok, 2).rel(2, "lock", 1500, 1600, ok)
	if r := Liveness(h.ops(), 10*time.Second); r.Verdict != Valid || r.Ops != 2 {
		t.Errorf("short quiet period: %s with %d acquires judged, want valid with 2", r.Verdict, r.Ops)
	}
	// A client that keeps giving up, under new process numbers, while
	// another is granted.
	h = (&hist{}).clientOf(1, "c1").clientOf(5, "c1").clientOf(2, "c2").
		acq(1, "lock", 0, 900, info, 0).acq(5, "lock", 1000, 1900, fail, 0).acq(5, "lock", 2000, 2900, fail, 0).
		acq(2, "lock", 100, 200, ok, 1).rel(2, "lock", 300, 400, ok).read(9, "x", 5000, 5001, ok, 0)
	expect(t, Liveness(h.ops(), bound), Invalid, `Client c1 asked for lock "lock" 3 times from 0.00 s to 2.90 s`)
	// A lock that grants nothing fails once a client asked for longer than
	// the bound; before, nobody can be called stuck.
	h = (&hist{}).acq(1, "lock", 0, 900, fail, 0).acq(1, "lock", 1000, 1900, info, 0).read(9, "x", 5000, 5001, ok, 0)
	expect(t, Liveness(h.ops(), bound), Invalid, "The lock granted nothing: 2 acquires by 1 client", "Process 1 asked for lock \"lock\" 2 times from 0.00 s to 1.90 s")
	expect(t, Liveness(h.ops(), time.Hour), Unknown, "The lock granted nothing: 2 acquires by 1 client", "no client asked for longer than the bound")
	// Liveness is judged once every fault has ended, and not at all when
	// one never ends.
	h = (&hist{}).fault("partition-leader", []string{"m0"}, 0, 3000).
		acq(1, "lock", 100, 2900, fail, 0).acq(1, "lock", 3100, 3200, ok, 1).rel(1, "lock", 3300, 3400, ok).read(9, "x", 5000, 5001, ok, 0)
	expect(t, Liveness(h.ops(), bound), Valid)
	h = (&hist{}).event("start", 0, []string{"m0"}, nil).
		acq(1, "lock", 100, 2900, fail, 0).acq(1, "lock", 3100, 3200, fail, 0).read(9, "x", 5000, 5001, ok, 0)
	expect(t, Liveness(h.ops(), bound), Unknown, "never ended")
	// A client whose locker cannot be built is stuck.
	h = (&hist{}).clientOf(1, "c1").clientOf(2, "c2").
		event("locker-failed", 100, []string{"c1"}, map[string]string{"error": "grant: no leader"}).
		event("locker-failed", 2500, []string{"c1"}, map[string]string{"error": "grant: no leader"}).
		acq(2, "lock", 100, 200, ok, 1).rel(2, "lock", 300, 400, ok).read(9, "x", 3000, 3001, ok, 0)
	expect(t, Liveness(h.ops(), bound), Invalid, "Client c1 could not build its locker 2 times (grant: no leader)")
	// Nothing to judge.
	expect(t, Liveness((&hist{}).read(9, "x", 0, 1, ok, 0).ops(), bound), Unknown, "no acquire")
}

func TestConsistency(t *testing.T) {
	same := []MemberHash{{"m0", 40, 0xabc, ""}, {"m1", 40, 0xabc, ""}, {"m2", 40, 0xabc, ""}}
	expect(t, Consistency(same), Valid)
	diverged := []MemberHash{{"m0", 40, 0xabc, ""}, {"m1", 40, 0xdef, ""}, {"m2", 40, 0xabc, ""}}
	r := Consistency(diverged)
	expect(t, r, Invalid, "Member m1 diverged: hash 00000def at revision 40, while m0, m2 have hash 00000abc at revision 40.")
	if len(r.Violations) != 1 || r.Violations[0].Members[0] != "m1" {
		t.Errorf("violations %+v", r.Violations)
	}
	behind := []MemberHash{{"m0", 40, 0xabc, ""}, {"m1", 40, 0xabc, ""}, {"m2", 38, 0xabc, ""}}
	expect(t, Consistency(behind), Invalid, "Member m2 diverged: hash 00000abc at revision 38")
	down := []MemberHash{{"m0", 40, 0xabc, ""}, {"m1", 40, 0xabc, ""}, {"m2", 0, 0, "connection refused"}}
	expect(t, Consistency(down), Unknown, "Could not compare m2 (connection refused).")
	expect(t, Consistency(nil), Unknown, "No member hashes")
}

func TestHandWrittenTimes(t *testing.T) {
	// Unix-epoch times: shown from the first record.
	const epoch = 1_700_000_000 * int64(time.Second)
	ops := (&hist{}).acq(4, "lock", 1000, 1900, ok, 38).acq(2, "lock", 3000, 3200, ok, 41).rel(2, "lock", 3300, 3301, ok).rel(4, "lock", 4000, 4001, ok).ops()
	for i := range ops {
		ops[i].Time += epoch
	}
	expect(t, Mutex(ops, Options{}), Invalid, "process 4 acquired token 38 at 0.90 s; process 2 acquired token 41 at 2.20 s")
}

func TestSegmentsAreSmall(t *testing.T) {
	// A contended run cuts into many segments, and an invalid one names a
	// small window.
	ops := generate(5000, 10, 0.02, 3)
	r := Mutex(ops, Options{})
	expect(t, r, Valid)
	if r.Segments < 10 || r.Checked != r.Segments {
		t.Errorf("mutex: %d segments, %d checked", r.Segments, r.Checked)
	}
	r = Resource(ops, Options{})
	expect(t, r, Valid)
	if r.Segments < 10 {
		t.Errorf("resource: %d segments", r.Segments)
	}
	bad := benchHistory(5000, 10, true)
	r = Mutex(bad, Options{})
	expect(t, r, Invalid, "porcupine needed only history indices")
	var w *Window
	for _, v := range r.Violations {
		if v.Window != nil {
			w = v.Window
			break
		}
	}
	if w == nil || w.Ops > 2*DefaultSegmentOps {
		t.Errorf("window %+v", w)
	}
}

func TestTimeoutSaysHowFar(t *testing.T) {
	// Many segments, one of them hard: the check says how far it got.
	h := &hist{}
	for i := range int64(300) {
		h.write(int(i%5), "", 10*i, 10*i+1, ok, i+1, i+1)
	}
	for p := range 30 {
		h.write(100+p, "", 5000, 6000, ok, 1000, int64(p+1000))
	}
	h.read(99, "", 5500, 5600, ok, 999999)
	r := Resource(h.ops(), Options{Timeout: 100 * time.Millisecond, SegmentOps: 10})
	expect(t, r, Unknown, "it checked", "segments")
	if r.Checked == 0 || r.Checked >= r.Segments {
		t.Errorf("checked %d of %d", r.Checked, r.Segments)
	}
}

// A lock that stops granting after the heal fails when the quiet period
// outlasts the bound, and is unknown (never valid) when it does not.
func TestLivenessHungAfterHeal(t *testing.T) {
	h := (&hist{}).clientOf(1, "c1").clientOf(2, "c2").
		acq(1, "lock", 0, 100, ok, 1).rel(1, "lock", 200, 300, ok).
		event("heal", 1000, nil, nil).
		acq(1, "lock", 1100, 0, none, 0).acq(2, "lock", 1200, 0, none, 0).
		read(9, "x", 4000, 4001, ok, 0)
	expect(t, Liveness(h.ops(), 2*time.Second), Invalid, `Client c1 (process 1) asked for lock "lock" at 1.10 s and had not got it 2s later`)
	// The same waits, with locktest's own process stalled in them: for a
	// quarter of the bound or more in all, the machine explains them (a
	// lock's processes are not run either); for less, it does not.
	stall := func(h *hist, at int64, d time.Duration) *hist {
		return h.event("stall", at, nil, map[string]string{"duration_ns": strconv.FormatInt(int64(d), 10)})
	}
	starved := func() *hist {
		return (&hist{}).clientOf(1, "c1").clientOf(2, "c2").
			acq(1, "lock", 0, 100, ok, 1).rel(1, "lock", 200, 300, ok).
			event("heal", 1000, nil, nil).
			acq(1, "lock", 1100, 0, none, 0).acq(2, "lock", 1200, 0, none, 0)
	}
	r := Liveness(stall(stall(starved(), 2000, 300*time.Millisecond), 3000, 300*time.Millisecond).read(9, "x", 4000, 4001, ok, 0).ops(), 2*time.Second)
	expect(t, r, Unknown, "Client c1 waited for the lock from 1.10 s", "locktest's own process was not run for 600ms in that time (the longest stall 300ms, from 1.70 s)", "Client c2 waited")
	anon := (&hist{}).event("heal", 1000, nil, nil).acq(1, "lock", 1100, 0, none, 0)
	expect(t, Liveness(stall(anon, 2000, 600*time.Millisecond).read(9, "x", 4000, 4001, ok, 0).ops(), 2*time.Second), Unknown,
		"Process 1 waited for the lock from 1.10 s")
	expect(t, Liveness(stall(starved(), 2000, 400*time.Millisecond).read(9, "x", 4000, 4001, ok, 0).ops(), 2*time.Second), Invalid,
		`Client c1 (process 1) asked for lock "lock" at 1.10 s and had not got it 2s later`)
	r = Liveness(h.ops(), 5*time.Second)
	expect(t, r, Unknown, "No client was granted a lock after the final heal at 1.00 s", "from there to the end of the history are less than the bound of 5s")
	// c1, granted before the heal, never releases and is seen to the end;
	// c2's acquires after it end with unknown outcomes, for longer than
	// the bound: not stuck, and not because the history is short (the
	// story said so before).
	h = (&hist{}).clientOf(1, "c1").clientOf(2, "c2").clientOf(4, "c2").
		acq(1, "lock", 500, 600, ok, 1).
		event("heal", 1000, nil, nil).
		acq(2, "lock", 1100, 6100, info, 0).acq(4, "lock", 6300, 11300, info, 0).
		read(1, "x", 11500, 11600, ok, 0).read(9, "x", 12000, 12001, ok, 0)
	r = Liveness(h.ops(), 5*time.Second)
	expect(t, r, Unknown, "No client was granted a lock after the final heal at 1.00 s, yet in the 11.001s from there", "while the lock was free")
	if strings.Contains(r.Explanation, "less than the bound") {
		t.Errorf("a quiet period of 11 s called less than the bound of 5 s: %s", r.Explanation)
	}
}

// A wait past the bound whose idle stretch saw the client's own lock
// process wait to run (starved events) for a quarter of the bound or more
// is not called stuck: a starved lock is slow. Only that client's wait is
// excused, only by starvation inside the stretch, and never convicted
// by it.
func TestLivenessStarvedProcess(t *testing.T) {
	waits := func() *hist {
		return (&hist{}).clientOf(1, "c1").clientOf(2, "c2").
			acq(1, "lock", 0, 100, ok, 1).rel(1, "lock", 200, 300, ok).
			event("heal", 1000, nil, nil).
			acq(1, "lock", 1100, 0, none, 0).acq(2, "lock", 1200, 0, none, 0)
	}
	// starved records client's process waiting to run for d over the
	// second before at (ms).
	starved := func(h *hist, client string, p int, at int64, d time.Duration) *hist {
		return h.event(histories.FStarved, at, []string{client}, map[string]string{"process": strconv.Itoa(p), "pid": "77",
			"duration_ns": strconv.FormatInt(int64(d), 10), "span_ns": strconv.FormatInt(int64(time.Second), 10)})
	}
	end := func(h *hist) []histories.Op { return h.read(9, "x", 4000, 4001, ok, 0).ops() }
	bound := 2 * time.Second
	stuck := func(c string, p int) string {
		return fmt.Sprintf(`Client %s (process %d) asked for lock "lock" at %s and had not got it 2s later`, c, p, map[int]string{1: "1.10 s", 2: "1.20 s"}[p])
	}

	both := starved(starved(waits(), "c1", 1, 3000, 600*time.Millisecond), "c2", 2, 3500, 700*time.Millisecond)
	expect(t, Liveness(end(both), bound), Unknown,
		"Client c1 waited for the lock from 1.10 s to 4.00 s", "its lock process waited to run for 600ms of those 2.901s",
		"Client c2 waited for the lock from 1.20 s to 4.00 s", "its lock process waited to run for 700ms of those 2.801s")

	// c1 starved, c2 not: c2 is stuck, c1 is not told.
	r := Liveness(end(starved(waits(), "c1", 1, 3000, 600*time.Millisecond)), bound)
	expect(t, r, Invalid, stuck("c2", 2))
	if strings.Contains(r.Explanation, stuck("c1", 1)) {
		t.Errorf("c1's starved wait was told as stuck: %s", r.Explanation)
	}
	// Less than a quarter of the bound, or outside the idle stretch (a
	// span half inside counts half): stuck.
	expect(t, Liveness(end(starved(waits(), "c1", 1, 3000, 400*time.Millisecond)), bound), Invalid, stuck("c1", 1))
	expect(t, Liveness(end(starved(starved(waits(), "c1", 1, 900, 900*time.Millisecond), "c1", 1, 1600, 900*time.Millisecond)), bound), Invalid, stuck("c1", 1))
	// Another process of the client's, no process event naming it: still
	// its client's wait.
	anon := (&hist{}).event("heal", 1000, nil, nil).acq(1, "lock", 1100, 0, none, 0)
	expect(t, Liveness(end(starved(anon, "c7", 1, 3000, 600*time.Millisecond)), bound), Unknown, "Process 1 waited for the lock from 1.10 s")
}

// ttlTerms are the words of a lock whose claim is a key with a TTL, on a
// server without revisions (a Redis backend's).
var ttlTerms = Terms{
	Expired:      ": its key expired on the server (TTL)",
	ExpiredShort: ": its key expired (TTL)",
	Noticed:      "%s's watchdog noticed at %s that its key was gone",
	Alive:        "before %s's key had expired (TTL)",
	Claim:        "the key",
	KeyTTL:       true,
	Unordered:    "the server has no revisions",
}

// withTerms is the History of ops whose backend, by the name its setup
// event gives, speaks with terms.
func withTerms(ops []histories.Op, backend string, terms Terms) *History {
	b := NewBuilder()
	b.Describe = describePause
	b.Terms = func(name string) Terms {
		if name == backend {
			return terms
		}
		return LeaseTerms
	}
	for _, op := range ops {
		if err := b.Add(op); err != nil {
			panic(err)
		}
	}
	return b.Finish()
}

// The stories speak the words of the history's backend: of a key's TTL,
// not of leases, for a backend that says so (the same paused holder, with
// the backend in the setup event).
func TestStoryBackendWording(t *testing.T) {
	ops := pausedHolder().
		event("setup", 0, nil, map[string]string{"backend": "ttl-store", "recipe": "ttl-lock", "ttl": "2"}).
		event("lease-lost", 4400, []string{"c4"}, map[string]string{"key": "lock", "token": "38"}).ops()
	h := withTerms(ops, "ttl-store", ttlTerms)
	m := h.Mutex(Options{})
	expect(t, m, Invalid, "the server deleted process 4's lock key (token 38) at 3.10 s: its key expired on the server (TTL); ",
		"process 4's watchdog noticed at 4.40 s that its key was gone")
	if regexp.MustCompile(`\blease\b`).MatchString(m.Explanation) {
		t.Errorf("a TTL store's story speaks of leases: %s", m.Explanation)
	}
	if h.Backend() != "ttl-store" || h.Recipe() != "ttl-lock" || described(pausedHolder().ops()).Backend() != "" {
		t.Errorf("backend %q, recipe %q", h.Backend(), h.Recipe())
	}
	// A history from before its backend was recorded gets the words
	// its caller gives for none.
	old := withTerms(pausedHolder().ops(), "", ttlTerms).Mutex(Options{})
	expect(t, old, Invalid, "its key expired on the server (TTL)")
}

// A client's wait runs across its retries: each attempt alone is within the
// bound, the wait is not.
func TestLivenessAcrossRetries(t *testing.T) {
	const bound = 7 * time.Second
	base := func() *hist {
		return (&hist{}).clientOf(1, "c1").clientOf(3, "c1").clientOf(2, "c2").
			fault("partition-leader", []string{"m0"}, 1000, 8000).event("heal", 10000, nil, nil).
			acq(2, "lock", 10050, 10100, ok, 1).rel(2, "lock", 10900, 10950, ok)
	}
	// Timed out after the heal, asked again, granted 8.9 s after it first
	// asked.
	h := base().acq(1, "lock", 10100, 15100, info, 0).acq(3, "lock", 15200, 19000, ok, 2).rel(3, "lock", 19100, 19200, ok)
	r := Liveness(h.ops(), bound)
	expect(t, r, Invalid, `Client c1 asked for lock "lock" at 10.10 s and got it only at 19.00 s, 8.9s later, over 2 attempts: process 1 asked at 10.10 s, outcome unknown at 15.10 s; process 3 asked at 15.20 s, granted at 19.00 s`)
	if len(r.Violations) != 1 || !slices.Equal(r.Violations[0].Processes, []int{1, 3}) {
		t.Errorf("violations %+v", r.Violations)
	}
	// The same wait, in flight across the heal: a fault may have hidden a
	// grant, so the wait restarts at the retry (3.9 s: within the bound).
	h = base().acq(1, "lock", 9500, 14500, info, 0).acq(3, "lock", 14600, 18500, ok, 2).rel(3, "lock", 18600, 18700, ok)
	expect(t, Liveness(h.ops(), bound), Valid)
	// Granted once, then failing again and again past the bound: stuck,
	// though granted before.
	h = base().acq(1, "lock", 10200, 10300, fail, 0).acq(1, "lock", 11000, 11100, ok, 2).rel(1, "lock", 11200, 11300, ok).
		acq(1, "lock", 12000, 15000, fail, 0).acq(1, "lock", 15100, 18100, fail, 0).acq(1, "lock", 18200, 19500, fail, 0).
		read(9, "x", 20000, 20001, ok, 0)
	expect(t, Liveness(h.ops(), bound), Invalid, `Client c1 asked for lock "lock" 3 times from 12.00 s to 19.50 s, more than the bound of 7s after the final heal at 10.00 s, and never got the lock.`)
	// Locker failures are part of the wait.
	h = base().event("locker-failed", 10100, []string{"c1"}, map[string]string{"error": "grant: no leader"}).
		acq(1, "lock", 16000, 18500, ok, 2).rel(1, "lock", 18600, 18700, ok)
	expect(t, Liveness(h.ops(), bound), Invalid, "its locker could not be built at 10.10 s (grant: no leader); process 1 asked at 16.00 s, granted at 18.50 s",
		"from 10.95 s, when process 2 released it, to 18.50 s nobody held it or was granted it, 7.55s: more than the bound of 7s")
}

// Only time in which the lock made no progress makes a client stuck: nobody
// held it or was granted it. A correct lock, fair or not, may keep a
// client waiting behind others' grants and sections longer than the bound.
func TestLivenessBehindOthers(t *testing.T) {
	const bound = 7 * time.Second
	base := func() *hist {
		return (&hist{}).clientOf(1, "c1").clientOf(5, "c1").clientOf(2, "c2").clientOf(3, "c3").clientOf(4, "c4").
			fault("partition-leader", []string{"m0"}, 1000, 8000).event("heal", 10000, nil, nil)
	}
	// A fair queue: c1 times out behind slow sections, asks again at the
	// back, and is granted 7.4 s after it first asked.
	h := base().acq(1, "lock", 10100, 15100, info, 0).acq(5, "lock", 15200, 17500, ok, 5).rel(5, "lock", 17600, 17700, ok).
		acq(2, "lock", 10150, 10200, ok, 2).rel(2, "lock", 12400, 12500, ok).
		acq(3, "lock", 10160, 12600, ok, 3).rel(3, "lock", 14800, 14900, ok).
		acq(4, "lock", 10170, 15000, ok, 4).rel(4, "lock", 17300, 17400, ok).read(9, "x", 19000, 19001, ok, 0)
	expect(t, Liveness(h.ops(), bound), Valid)
	// An unfair lock: c1 loses every race for 15 s while c2 and c3 take
	// turns.
	h = base().acq(1, "lock", 10100, 15100, fail, 0).acq(1, "lock", 15200, 20200, fail, 0).acq(1, "lock", 20300, 25300, fail, 0)
	for i := int64(0); i < 30; i++ {
		p := 2 + int(i%2)
		at := 10050 + 500*i
		h = h.acq(p, "lock", at-40, at, ok, 10+i).rel(p, "lock", at+400, at+450, ok)
	}
	expect(t, Liveness(h.read(9, "x", 26000, 26001, ok, 0).ops(), bound), Valid)
	// Idle times of 4 s on either side of a grant to another do not add
	// up: the grant was progress.
	h = base().acq(2, "lock", 10050, 10100, ok, 2).rel(2, "lock", 10150, 10200, ok).
		acq(3, "lock", 10120, 14200, ok, 3).rel(3, "lock", 14250, 14300, ok).
		acq(1, "lock", 10150, 18300, ok, 4).rel(1, "lock", 18400, 18500, ok).read(9, "x", 19000, 19001, ok, 0)
	expect(t, Liveness(h.ops(), bound), Valid)
	// A lock that stops granting once c2 released it: c1 is stuck from
	// the release.
	h = base().acq(2, "lock", 10050, 10100, ok, 2).rel(2, "lock", 10900, 11000, ok).
		acq(1, "lock", 10500, 0, none, 0).read(9, "x", 20000, 20001, ok, 0)
	r := Liveness(h.ops(), bound)
	expect(t, r, Invalid, `Client c1 (process 1) asked for lock "lock" at 10.50 s and had not got it at 18.00 s, 7s after process 2 released it, nobody holding it or granted it in between`)
	if len(r.Violations) != 1 || r.Violations[0].From != 11000*ms {
		t.Errorf("violations %+v", r.Violations)
	}
	// A holder never seen again after 12.1 s: the lock is idle from then.
	h = base().acq(2, "lock", 10050, 10100, ok, 2).read(2, "x", 12000, 12100, ok, 0).
		acq(1, "lock", 10200, 0, none, 0).read(9, "x", 20000, 20001, ok, 0)
	expect(t, Liveness(h.ops(), bound), Invalid, "at 19.10 s, 7s after process 2, its holder, was last seen")
	// Holds of another lock are no progress of this one.
	h = base().acq(2, "b", 10050, 10100, ok, 2).rel(2, "b", 19800, 19900, ok).
		acq(1, "a", 10200, 0, none, 0).read(9, "x", 20000, 20001, ok, 0)
	expect(t, Liveness(h.ops(), bound), Invalid, `Client c1 (process 1) asked for lock "a" at 10.20 s and had not got it 7s later, at 17.20 s`)
	// Failing again and again while nobody is granted: stuck.
	h = base().acq(2, "lock", 10050, 10100, ok, 2).rel(2, "lock", 10200, 10300, ok).
		acq(1, "lock", 10200, 15200, fail, 0).acq(1, "lock", 15300, 18500, fail, 0).read(9, "x", 20000, 20001, ok, 0)
	expect(t, Liveness(h.ops(), bound), Invalid, `Client c1 asked for lock "lock" 2 times from 10.20 s to 18.50 s and never got the lock; from 10.30 s, when process 2 released it, to 18.50 s nobody held it or was granted it, 8.2s: more than the bound of 7s after the final heal at 10.00 s.`)
}

// A fault's story words what the fault found at its end, not only what it
// set out to do: a lost reply learns at its stop whether the server
// answered the request before the cut, and a story that told from the
// start's params alone would claim the request took effect when the
// server had not answered it.
func TestStoryFaultOutcome(t *testing.T) {
	start := histories.Params{"op": "release"}
	stop := histories.Params{"op": "release", "server_answered": "no, within 3s after the fault's duration"}
	ops := []histories.Op{
		{Type: histories.Info, F: "start", Process: histories.Nemesis, Time: 1000 * ms, Value: &histories.Value{Fault: "lost-reply-release", Targets: []string{"c1"}, Params: start}},
		{Index: 1, Type: histories.Info, F: "stop", Process: histories.Nemesis, Time: 1300 * ms, Value: &histories.Value{Fault: "lost-reply-release", Targets: []string{"c1"}, Params: stop}},
	}
	b := NewBuilder()
	b.Describe = func(_ string, targets []string, p map[string]string) (string, bool) {
		if strings.HasPrefix(p["server_answered"], "no") {
			return targets[0] + "'s release: whether it took effect is unknown", true
		}
		return targets[0] + "'s release reached the server", true
	}
	for _, op := range ops {
		if err := b.Add(op); err != nil {
			t.Fatal(err)
		}
	}
	h := b.Finish()
	fs := h.story().faults
	if len(fs) != 1 {
		t.Fatalf("faults %+v", fs)
	}
	if got, want := h.phrase(fs[0]), "c1's release: whether it took effect is unknown"; got != want {
		t.Errorf("phrase %q, want %q", got, want)
	}
	if fs[0].Params["server_answered"] != "" {
		t.Errorf("the start's params changed: %v", fs[0].Params)
	}
}
