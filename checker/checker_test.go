package checker

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/histories"
)

// hist builds a history. Times are in milliseconds; an operation is given
// with both its invocation and completion, and ops() sorts the records by
// time, as a recorder would have written them.
type hist struct{ recs []histories.Op }

const ms = int64(time.Millisecond)

// none marks an operation without completion.
const none histories.Type = ""

func (h *hist) op(p int, key, f string, inv, ret int64, typ histories.Type, invV, retV *histories.Value) *hist {
	h.recs = append(h.recs, histories.Op{Type: histories.Invoke, F: f, Process: histories.Process(p), Time: inv * ms, Key: key, Value: invV})
	if typ != none {
		h.recs = append(h.recs, histories.Op{Type: typ, F: f, Process: histories.Process(p), Time: ret * ms, Key: key, Value: retV})
	}
	return h
}

func (h *hist) acq(p int, key string, inv, ret int64, typ histories.Type, token int64) *hist {
	var v *histories.Value
	if typ == histories.OK {
		v = histories.TokenValue(token)
	}
	return h.op(p, key, histories.Acquire, inv, ret, typ, nil, v)
}

func (h *hist) rel(p int, key string, inv, ret int64, typ histories.Type) *hist {
	return h.op(p, key, histories.Release, inv, ret, typ, nil, nil)
}

func (h *hist) write(p int, key string, inv, ret int64, typ histories.Type, token, v int64) *hist {
	return h.op(p, key, histories.Write, inv, ret, typ, histories.WriteValue(token, v), histories.WriteValue(token, v))
}

// readTok is a read made under a fencing token.
func (h *hist) readTok(p int, key string, inv, ret int64, typ histories.Type, token, v int64) *hist {
	var rv *histories.Value
	if typ == histories.OK {
		rv = histories.ReadValue(v)
	}
	return h.op(p, key, histories.Read, inv, ret, typ, histories.TokenValue(token), rv)
}

func (h *hist) read(p int, key string, inv, ret int64, typ histories.Type, v int64) *hist {
	var rv *histories.Value
	if typ == histories.OK {
		rv = histories.ReadValue(v)
	}
	return h.op(p, key, histories.Read, inv, ret, typ, nil, rv)
}

func (h *hist) nemesis(f string, at int64) *hist {
	h.recs = append(h.recs, histories.Op{Type: histories.Info, F: f, Process: histories.Nemesis, Time: at * ms,
		Value: &histories.Value{Fault: f, Targets: []string{"n1"}}})
	return h
}

func (h *hist) ops() []histories.Op {
	ops := slices.Clone(h.recs)
	slices.SortStableFunc(ops, func(a, b histories.Op) int { return cmp.Compare(a.Time, b.Time) })
	for i := range ops {
		ops[i].Index = i
	}
	return ops
}

func expect(t *testing.T, r Result, want Verdict, explains ...string) {
	t.Helper()
	if r.Verdict != want {
		t.Fatalf("%s: verdict %s, want %s; explanation:\n%s", r.Name, r.Verdict, want, r.Explanation)
	}
	for _, e := range explains {
		if !strings.Contains(r.Explanation, e) {
			t.Errorf("%s: explanation lacks %q:\n%s", r.Name, e, r.Explanation)
		}
	}
}

const (
	ok   = histories.OK
	fail = histories.Fail
	info = histories.Info
)

func TestMutexValid(t *testing.T) {
	// Three processes contend; acquires wait while another holds the lock.
	h := (&hist{}).
		acq(0, "", 0, 10, ok, 5).rel(0, "", 20, 21, ok).
		acq(1, "", 1, 22, ok, 6).rel(1, "", 30, 31, ok).
		acq(2, "", 2, 32, ok, 9).rel(2, "", 40, 41, ok).
		acq(0, "", 25, 42, ok, 12).rel(0, "", 43, 44, ok).
		acq(1, "", 35, 36, fail, 0).
		read(2, "", 45, 46, ok, 0).nemesis("partition", 3)
	r := Mutex(h.ops(), Options{})
	expect(t, r, Valid)
	if r.Name != "mutex" || r.Ops != 9 || r.Keys != 1 || r.Unknown != 0 {
		t.Errorf("result %+v", r)
	}
}

func TestMutexOverlappingHolders(t *testing.T) {
	h := (&hist{}).
		acq(4, "lock", 1000, 1900, ok, 38).rel(4, "lock", 4000, 4001, ok).
		acq(2, "lock", 3000, 3200, ok, 41).rel(2, "lock", 3300, 3301, ok)
	expect(t, Mutex(h.ops(), Options{}), Invalid,
		`On key "lock", process 4 and process 2 both believed they held the lock from 3.20 s to 3.30 s: process 4 acquired token 38 at 1.90 s; process 2 acquired token 41 at 3.20 s; process 2 released the lock at 3.30 s; process 4 released the lock at 4.00 s.`,
		`porcupine needed only history indices 0 to 7`,
		`On key "lock" porcupine linearizes at most`)
}

// An overlap of a few milliseconds is said as such, not as "from 3.20 s to
// 3.20 s".
func TestMutexShortOverlap(t *testing.T) {
	h := (&hist{}).
		acq(4, "lock", 1000, 1900, ok, 38).rel(4, "lock", 3203, 3204, ok).
		acq(2, "lock", 3000, 3200, ok, 41).rel(2, "lock", 3500, 3501, ok)
	expect(t, Mutex(h.ops(), Options{}), Invalid,
		`On key "lock", process 4 and process 2 both believed they held the lock for 3 ms from 3.200 s: `)
}

func TestMutexTokensMustIncrease(t *testing.T) {
	for _, second := range []int64{3, 5} {
		h := (&hist{}).
			acq(0, "", 0, 1, ok, 5).rel(0, "", 2, 3, ok).
			acq(1, "", 4, 5, ok, second).rel(1, "", 6, 7, ok)
		expect(t, Mutex(h.ops(), Options{}), Invalid, "tokens must grow with each grant")
	}
	// Concurrent acquires may be granted in either order.
	h := (&hist{}).
		acq(0, "", 0, 10, ok, 7).rel(0, "", 11, 12, ok).
		acq(1, "", 1, 5, ok, 6).rel(1, "", 6, 7, ok)
	expect(t, Mutex(h.ops(), Options{}), Valid)
}

func TestMutexEqualTimestampsOverlap(t *testing.T) {
	// p1's release is invoked at 10 and p2's acquire returns at 10: closed
	// intervals let the release take effect just before the acquire.
	h := (&hist{}).
		acq(1, "", 0, 1, ok, 1).rel(1, "", 10, 20, ok).
		acq(2, "", 5, 10, ok, 2).rel(2, "", 21, 22, ok)
	expect(t, Mutex(h.ops(), Options{}), Valid)
	h = (&hist{}).
		acq(1, "", 0, 1, ok, 1).rel(1, "", 10, 20, ok).
		acq(2, "", 5, 9, ok, 2).rel(2, "", 21, 22, ok)
	expect(t, Mutex(h.ops(), Options{}), Invalid)
}

func TestMutexAcquireUnknown(t *testing.T) {
	// p1's acquire times out: it may have taken the lock, but its process
	// never comes back, and the others go on acquiring. Its token, had it
	// one, does not constrain later grants.
	h := (&hist{}).
		acq(1, "", 0, 5000, info, 0).
		op(3, "", histories.Acquire, 1, 4000, info, nil, histories.TokenValue(99)).
		acq(2, "", 10, 20, ok, 6).rel(2, "", 30, 40, ok).
		acq(5, "", 50, 60, ok, 8).rel(5, "", 70, 80, ok).
		acq(6, "", 90, 0, none, 0) // no completion: info
	r := Mutex(h.ops(), Options{})
	expect(t, r, Valid)
	if r.Unknown != 3 || r.Ops != 7 {
		t.Errorf("result %+v", r)
	}
}

func TestMutexReleaseUnknown(t *testing.T) {
	for _, typ := range []histories.Type{info, fail, none} {
		// The release may have taken effect right away...
		h := (&hist{}).
			acq(1, "", 0, 1, ok, 1).rel(1, "", 10, 5000, typ).
			acq(2, "", 5, 20, ok, 2).rel(2, "", 30, 31, ok)
		expect(t, Mutex(h.ops(), Options{}), Valid)
		// ...or never: nothing else wants the lock.
		h = (&hist{}).acq(1, "", 0, 1, ok, 1).rel(1, "", 10, 5000, typ).read(2, "", 20, 21, ok, 0)
		expect(t, Mutex(h.ops(), Options{}), Valid)
		// But not before it was invoked.
		h = (&hist{}).
			acq(1, "", 0, 1, ok, 1).rel(1, "", 10, 5000, typ).
			acq(2, "", 5, 8, ok, 2).rel(2, "", 30, 31, ok)
		expect(t, Mutex(h.ops(), Options{}), Invalid, "process 1 and process 2 both believed they held the lock", "process 2 acquired token 2 at 0.01 s")
	}
	// A release retried after a failed one (as a hand-written history may
	// have it; after info a process never acts again): the hold ends
	// between the first's invocation and the retry's return.
	for _, grant := range []int64{8, 12, 25, 45} {
		h := (&hist{}).
			acq(1, "", 0, 1, ok, 1).rel(1, "", 10, 20, fail).rel(1, "", 30, 40, ok).
			acq(2, "", 5, grant, ok, 2)
		want := Valid
		if grant < 10 {
			want = Invalid
		}
		expect(t, Mutex(h.ops(), Options{}), want)
	}
	// A failed release leaves its process free to acquire again.
	h := (&hist{}).
		acq(1, "", 0, 1, ok, 1).rel(1, "", 2, 3, fail).
		acq(1, "", 4, 5, ok, 2).rel(1, "", 6, 7, ok)
	expect(t, Mutex(h.ops(), Options{}), Valid)
}

func TestMutexProcessStopsHolding(t *testing.T) {
	// p1 acquires, then its read times out and it is never seen again: its
	// lock expires at some time after the read was invoked.
	h := (&hist{}).
		acq(1, "k", 0, 10, ok, 3).read(1, "k", 20, 5000, info, 0).
		acq(2, "k", 5, 6000, ok, 4).rel(2, "k", 6001, 6002, ok)
	expect(t, Mutex(h.ops(), Options{}), Valid)
	// p2 cannot have acquired while p1 was still acting as holder.
	h = (&hist{}).
		acq(1, "k", 0, 10, ok, 3).read(1, "k", 20, 5000, info, 0).
		acq(2, "k", 5, 15, ok, 4).rel(2, "k", 6001, 6002, ok)
	expect(t, Mutex(h.ops(), Options{}), Invalid, "process 1 acquired token 3 at 0.01 s; process 2 acquired token 4 at 0.01 s; process 1 was last seen acting as holder at 0.02 s")
	// A history that ends with the lock held is fine.
	h = (&hist{}).acq(1, "k", 0, 10, ok, 3).acq(2, "k", 5, 0, none, 0)
	expect(t, Mutex(h.ops(), Options{}), Valid)
}

// A release with nothing of its own to free breaks no promise: a lock may
// answer it ok (etcd deletes nothing). Had it freed another's hold, that
// holder still believes, and the next grant shows the overlap.
func TestMutexReleaseWithoutAcquire(t *testing.T) {
	h := (&hist{}).rel(7, "", 0, 1, ok)
	expect(t, Mutex(h.ops(), Options{}), Valid)
	h = (&hist{}).rel(7, "", 0, 1, info).acq(1, "", 2, 3, ok, 1)
	expect(t, Mutex(h.ops(), Options{}), Valid)
	// p7's release of p1's hold lets p2 in while p1 still holds.
	h = (&hist{}).acq(1, "", 0, 1, ok, 1).rel(7, "", 2, 3, ok).acq(2, "", 4, 5, ok, 2).rel(2, "", 6, 7, ok).rel(1, "", 8, 9, ok)
	expect(t, Mutex(h.ops(), Options{}), Invalid, "process 1 and process 2 both believed they held the lock")
}

func TestMutexPartitionedByKey(t *testing.T) {
	// Each key's lock is held by one process at a time; tokens are global
	// revisions, so each key sees a growing subsequence.
	h := (&hist{}).
		acq(1, "a", 0, 10, ok, 5).acq(2, "b", 0, 10, ok, 6).
		rel(1, "a", 20, 21, ok).rel(2, "b", 20, 21, ok).
		acq(2, "a", 22, 23, ok, 8).acq(1, "b", 22, 23, ok, 7).
		rel(2, "a", 30, 31, ok).rel(1, "b", 30, 31, ok)
	r := Mutex(h.ops(), Options{})
	expect(t, r, Valid)
	if r.Keys != 2 {
		t.Errorf("keys %d", r.Keys)
	}
	// The same holders on one key overlap.
	h = (&hist{}).
		acq(1, "a", 0, 10, ok, 5).acq(2, "b", 0, 10, ok, 6).acq(3, "b", 11, 12, ok, 9).
		rel(1, "a", 20, 21, ok).rel(2, "b", 20, 21, ok).rel(3, "b", 22, 23, ok)
	expect(t, Mutex(h.ops(), Options{}), Invalid, `On key "b"`)
}

func TestResourceValid(t *testing.T) {
	h := (&hist{}).
		read(1, "", 0, 1, ok, 0).write(1, "", 2, 3, ok, 5, 1).
		read(2, "", 4, 5, ok, 1).write(2, "", 6, 7, ok, 7, 2).
		write(3, "", 8, 9, ok, 7, 3). // equal tokens pass the fence
		write(4, "", 10, 11, fail, 6, 9).
		read(4, "", 12, 13, fail, 0).read(5, "", 12, 13, info, 0).
		read(1, "", 14, 15, ok, 3).
		acq(1, "", 16, 17, ok, 1).nemesis("kill", 5)
	r := Resource(h.ops(), Options{})
	expect(t, r, Valid)
	if r.Name != "resource" || r.Ops != 9 || r.Keys != 1 || r.Unknown != 1 {
		t.Errorf("result %+v", r)
	}
}

func TestResourceStaleRead(t *testing.T) {
	h := (&hist{}).
		write(1, "", 0, 1, ok, 5, 1).write(2, "", 2, 3, ok, 6, 2).
		read(3, "", 4, 5, ok, 1)
	expect(t, Resource(h.ops(), Options{}), Invalid, `On key "" porcupine linearizes at most 2 of 3 operations`, "p3 read → 1")
	// Concurrent with the second write, the old value is fine.
	h = (&hist{}).
		write(1, "", 0, 1, ok, 5, 1).write(2, "", 2, 5, ok, 6, 2).
		read(3, "", 4, 6, ok, 1)
	expect(t, Resource(h.ops(), Options{}), Valid)
	// A failed write had no effect: in a run, whose resource starts at 0,
	// reading its value is a violation; in a history that does not say so,
	// the value may have been there before.
	h = (&hist{}).setup(map[string]string{"workload": "counter"}).write(1, "", 0, 1, fail, 5, 1).read(3, "", 4, 5, ok, 1)
	expect(t, Resource(h.ops(), Options{}), Invalid)
	h = (&hist{}).write(1, "", 0, 1, fail, 5, 1).read(3, "", 4, 5, ok, 1)
	expect(t, Resource(h.ops(), Options{}), Valid)
}

// A read made under a newer token raises the fence: an older holder's write
// accepted after it is a lost update the fenced resource would have refused.
func TestResourceReadRaisesFence(t *testing.T) {
	lost := (&hist{}).
		readTok(1, "k", 0, 10, histories.OK, 5, 0).
		readTok(2, "k", 20, 30, histories.OK, 7, 0).
		write(1, "k", 40, 50, histories.OK, 5, 1).
		write(2, "k", 60, 70, histories.OK, 7, 1).ops()
	expect(t, Resource(lost, Options{}), Invalid)
	refused := (&hist{}).
		readTok(1, "k", 0, 10, histories.OK, 5, 0).
		readTok(2, "k", 20, 30, histories.OK, 7, 0).
		write(1, "k", 40, 50, histories.Fail, 5, 1).
		write(2, "k", 60, 70, histories.OK, 7, 1).ops()
	expect(t, Resource(refused, Options{}), Valid)
}

func TestResourceLowerTokenAccepted(t *testing.T) {
	h := (&hist{}).
		write(4, "r", 1000, 1500, ok, 41, 6).
		write(2, "r", 3100, 3200, ok, 38, 7)
	expect(t, Resource(h.ops(), Options{}), Invalid,
		`On key "r", the resource accepted process 2's write of 7 with token 38 (invoked 3.10 s, accepted 3.20 s), although process 4's write of 6 with the higher token 41 had been accepted by 1.50 s. What happened: the resource accepted process 4's write with token 41 at 1.50 s; the resource accepted process 2's write with token 38 at 3.20 s, after process 4's write with token 41 at 1.50 s.`)
}

func TestResourceEqualTimestampsOverlap(t *testing.T) {
	for _, v := range []int64{0, 1} {
		h := (&hist{}).write(1, "", 0, 10, ok, 1, 1).read(2, "", 10, 12, ok, v)
		expect(t, Resource(h.ops(), Options{}), Valid)
	}
	h := (&hist{}).write(1, "", 0, 10, ok, 1, 1).read(2, "", 11, 12, ok, 0)
	expect(t, Resource(h.ops(), Options{}), Invalid)
}

func TestResourceWriteUnknown(t *testing.T) {
	for _, typ := range []histories.Type{info, none} {
		// Observed later, long after the write gave up.
		h := (&hist{}).
			write(1, "", 0, 1, ok, 5, 1).
			write(2, "", 2, 3, typ, 6, 2).
			read(3, "", 4, 5, ok, 1).read(3, "", 6, 7, ok, 2).read(3, "", 8, 9, ok, 2)
		expect(t, Resource(h.ops(), Options{}), Valid)
		// Once observed, it cannot be undone.
		h = (&hist{}).
			write(1, "", 0, 1, ok, 5, 1).
			write(2, "", 2, 3, typ, 6, 2).
			read(3, "", 4, 5, ok, 2).read(3, "", 6, 7, ok, 1)
		expect(t, Resource(h.ops(), Options{}), Invalid)
		// Never observed: it may not have happened, so a later write with
		// a lower token may pass the fence.
		h = (&hist{}).
			write(2, "", 2, 3, typ, 60, 2).
			write(1, "", 4, 5, ok, 5, 1).read(3, "", 6, 7, ok, 1)
		expect(t, Resource(h.ops(), Options{}), Valid)
		// Once a write with a higher token is accepted, the unknown write
		// can no longer pass the fence...
		h = (&hist{}).
			write(1, "", 0, 1, ok, 5, 1).
			write(2, "", 2, 3, typ, 6, 2).
			write(3, "", 4, 5, ok, 7, 3).read(4, "", 6, 7, ok, 2)
		expect(t, Resource(h.ops(), Options{}), Invalid)
		// ...but after one with an equal token it still can, even long after.
		h = (&hist{}).
			write(1, "", 0, 1, ok, 5, 1).
			write(2, "", 2, 3, typ, 6, 2).
			write(3, "", 4, 5, ok, 6, 3).read(4, "", 6, 7, ok, 3).read(4, "", 8, 9, ok, 2)
		expect(t, Resource(h.ops(), Options{}), Valid)
		// A stale token is rejected by the fence, so its value cannot be read.
		h = (&hist{}).
			write(1, "", 0, 1, ok, 5, 1).
			write(2, "", 2, 3, typ, 4, 2).
			read(3, "", 4, 5, ok, 2)
		expect(t, Resource(h.ops(), Options{}), Invalid)
	}
}

// A write that timed out for its client but that the resource's own log
// shows it accepted, with a stale token, damaged the data even though no
// read ever returned its value: the client's history alone allows that it
// never arrived, the resource's log does not.
func TestResourceWriteAppliedByTheLog(t *testing.T) {
	h := (&hist{}).setup(map[string]string{"workload": "counter"}).
		read(1, "k", 0, 1, ok, 0).write(1, "k", 1, 2, ok, 9, 1).
		read(2, "k", 0, 1, ok, 0).write(2, "k", 3, 4, info, 4, 1).
		read(3, "k", 4, 5, ok, 1).write(3, "k", 5, 6, ok, 10, 2).read(4, "k", 7, 8, ok, 2)
	expect(t, Resource(h.ops(), Options{}), Valid)
	hh := Build(h.ops())
	if n := hh.MarkApplied([]AppliedWrite{{"k", 9, 1}, {"k", 4, 1}, {"k", 10, 2}, {"other", 4, 1}}); n != 1 {
		t.Fatalf("marked %d writes, want the one of unknown outcome", n)
	}
	r := hh.Resource(Options{})
	expect(t, r, Invalid)
	if !strings.Contains(r.Violations[0].Story, "the resource's log shows it accepted") {
		t.Errorf("story %q does not say the resource's log showed it", r.Violations[0].Story)
	}
	if c := hh.InvariantCounts(); c[0].Accepted != 3 || c[0].Unknown != 0 {
		t.Errorf("invariant counts %+v: want the applied write accepted", c[0])
	}
	expect(t, hh.Invariant(), Invalid, "3 writes were accepted but the final value is 2: 1 update was lost")
	// A write of unknown outcome the log does not show had no effect.
	hh = Build(h.ops())
	hh.MarkApplied([]AppliedWrite{{"k", 9, 1}, {"k", 10, 2}})
	expect(t, hh.Resource(Options{}), Valid)
	if c := hh.InvariantCounts(); c[0].Accepted != 2 || c[0].Unknown != 0 || c[0].Rejected != 1 {
		t.Errorf("invariant counts %+v: want the write the log lacks counted as not accepted", c[0])
	}
	if v := hh.Invariant().Verdict; v != Valid {
		t.Errorf("invariant %s: the final read 2 follows 2 accepted writes", v)
	}
}

func TestResourcePartitionedByKey(t *testing.T) {
	h := (&hist{}).
		write(1, "a", 0, 1, ok, 5, 1).write(2, "b", 0, 1, ok, 6, 1).
		write(1, "b", 2, 3, ok, 7, 2).write(2, "a", 2, 3, ok, 8, 2).
		read(3, "a", 4, 5, ok, 2).read(4, "b", 4, 5, ok, 2)
	r := Resource(h.ops(), Options{})
	expect(t, r, Valid)
	if r.Keys != 2 {
		t.Errorf("keys %d", r.Keys)
	}
	h.read(5, "b", 6, 7, ok, 1)
	expect(t, Resource(h.ops(), Options{}), Invalid, `On key "b"`)
}

func TestTimeoutIsUnknown(t *testing.T) {
	// Thirty concurrent writes and a read of a value none of them wrote:
	// porcupine must try every subset of the writes before the read.
	h := &hist{}
	for p := range 30 {
		h.write(p, "", 0, 1000, ok, 1, int64(p+1))
	}
	h.read(99, "", 500, 600, ok, 999)
	r := Resource(h.ops(), Options{Timeout: 50 * time.Millisecond})
	expect(t, r, Unknown, "within 50ms")
	if r.Duration > 10*time.Second {
		t.Errorf("took %v", r.Duration)
	}
}

func TestLinearizable(t *testing.T) {
	h := (&hist{}).
		acq(0, "", 0, 1, ok, 5).read(0, "", 2, 3, ok, 0).write(0, "", 4, 5, ok, 5, 1).rel(0, "", 6, 7, ok).
		acq(1, "", 1, 8, ok, 6).read(1, "", 9, 10, ok, 1).write(1, "", 11, 12, ok, 6, 2).rel(1, "", 13, 14, ok)
	rs := Linearizable(h.ops(), Options{})
	if len(rs) != 2 || rs[0].Name != "mutex" || rs[1].Name != "resource" {
		t.Fatalf("results %+v", rs)
	}
	expect(t, rs[0], Valid)
	expect(t, rs[1], Valid)
	if rs[0].Ops != 4 || rs[1].Ops != 4 {
		t.Errorf("ops %d, %d", rs[0].Ops, rs[1].Ops)
	}
}

func TestEmptyAndMalformed(t *testing.T) {
	// A check is never valid on nothing.
	for _, r := range Judge(Input{History: Build(nil)}) {
		expect(t, r, Unknown)
	}
	ops := []histories.Op{{Type: histories.OK, F: histories.Acquire, Process: 1, Value: histories.TokenValue(1)}}
	for _, r := range Linearizable(ops, Options{}) {
		expect(t, r, Unknown, "malformed")
	}
}

func TestVisualization(t *testing.T) {
	h := (&hist{}).
		acq(1, "", 0, 10, ok, 41).rel(1, "", 20, 30, ok).
		acq(3, "", 5, 15, ok, 43).acq(4, "", 1, 2, info, 0).
		write(3, "", 16, 17, ok, 43, 1).nemesis("partition", 3)
	rs := Linearizable(h.ops(), Options{})
	expect(t, rs[0], Invalid)
	for _, r := range rs {
		if r.Visual == nil {
			t.Fatalf("%s: no visualization", r.Name)
		}
		var b strings.Builder
		if err := r.Visual.Write(&b); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "<html") {
			t.Errorf("%s: not HTML", r.Name)
		}
		if r.Name == "mutex" {
			for _, s := range []string{"p1 acquire → token 41", "lock held by p1 (last token 41)", "partition", "not modelled"} {
				if !strings.Contains(b.String(), s) {
					t.Errorf("mutex visualization lacks %q", s)
				}
			}
		}
	}
}

// generate makes a valid history of n operations: procs clients cycle
// through acquire, read, write, release on one key, waiting for the lock in
// FIFO order, with tokens growing by random steps. With probability unknown,
// an acquire (while waiting), write or release times out; the write then
// took effect or not at random, and the client goes on as a new process.
func generate(n, procs int, unknown float64, seed uint64) []histories.Op {
	rng := rand.New(rand.NewPCG(seed, 0))
	h := &hist{}
	process := make([]int, procs)   // each client's current process number
	waiting := make([]int64, procs) // when each client invoked its acquire
	queue := make([]int, procs)
	for c := range procs {
		process[c], waiting[c], queue[c] = c, int64(c), c
	}
	next := procs
	renumber := func(c int) { process[c], next = next, next+1 }
	timeout := func() bool { return rng.Float64() < unknown }
	var now, token, value int64
	for len(h.recs) < 2*n {
		c := queue[0]
		queue = queue[1:]
		p := process[c]
		g := max(now, waiting[c]) + 1 + rng.Int64N(3)
		if timeout() { // gave up waiting, before the grant
			h.acq(p, "", waiting[c], g-1, info, 0)
			renumber(c)
			waiting[c] = g + rng.Int64N(5)
			queue = append(queue, c)
			continue
		}
		token += 1 + rng.Int64N(3)
		h.acq(p, "", waiting[c], g, ok, token)
		h.read(p, "", g+1, g+2, ok, value)
		t, lost := g+2, false
		if timeout() {
			h.write(p, "", t+1, t+50, info, token, value+1)
			if rng.IntN(2) == 0 {
				value++
			}
			t, lost = t+50, true
		} else {
			value++
			h.write(p, "", t+1, t+2, ok, token, value)
			t += 2
		}
		if timeout() {
			h.rel(p, "", t+1, t+60, info) // took effect at once
			lost = true
		} else {
			h.rel(p, "", t+1, t+2, ok)
		}
		now = t + 2
		if lost {
			renumber(c)
		}
		waiting[c] = max(now, t+60) + rng.Int64N(5)
		queue = append(queue, c)
	}
	return h.ops()
}

func TestGenerated(t *testing.T) {
	for _, unknown := range []float64{0, 0.05} {
		for _, r := range Linearizable(generate(2000, 10, unknown, 2), Options{Timeout: time.Minute}) {
			expect(t, r, Valid)
		}
	}
	ops := generate(2000, 10, 0, 1)
	// Swap the tokens of two consecutive grants: both checks fail.
	var grants []int
	for i, op := range ops {
		if op.F == histories.Acquire && op.Type == histories.OK {
			grants = append(grants, i)
		}
	}
	a, b := ops[grants[100]], ops[grants[101]]
	ops[grants[100]].Value, ops[grants[101]].Value = b.Value, a.Value
	expect(t, Mutex(ops, Options{Timeout: time.Minute}), Invalid, "must take effect by")
}

// BenchmarkMutexValid checks a valid history of 20k operations (10k of them
// acquire or release) by 10 processes on one key.
func BenchmarkMutexValid(b *testing.B) { benchmark(b, Mutex, 0) }

// BenchmarkMutexValidUnknown is the same with 5% of acquires, writes and
// releases timing out.
func BenchmarkMutexValidUnknown(b *testing.B) { benchmark(b, Mutex, 0.05) }

func BenchmarkResourceValid(b *testing.B) { benchmark(b, Resource, 0) }

func BenchmarkResourceValidUnknown(b *testing.B) { benchmark(b, Resource, 0.05) }

func benchmark(b *testing.B, check func([]histories.Op, Options) Result, unknown float64) {
	ops := generate(20000, 10, unknown, 1)
	for b.Loop() {
		if r := check(ops, Options{}); r.Verdict != Valid {
			b.Fatalf("verdict %s: %s", r.Verdict, r.Explanation)
		}
	}
}
