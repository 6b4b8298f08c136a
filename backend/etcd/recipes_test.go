package etcd

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/backend/etcd/etcdlock"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/recordtest"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/resource"
	"github.com/locktest/locktest/workload"
)

// results runs every check of a history but liveness.
func results(ops []histories.Op) map[string]checker.Result {
	h := checker.Build(ops)
	out := map[string]checker.Result{}
	for _, r := range append(h.Linearizable(checker.Options{Timeout: 20 * time.Second}), h.Invariant(), h.Contract()) {
		out[r.Name] = r
	}
	return out
}

// countOK counts the ok completions of f.
func countOK(ops []histories.Op, f string) int {
	n := 0
	for _, op := range ops {
		if op.F == f && op.Type == histories.OK {
			n++
		}
	}
	return n
}

// waitReleases waits for n releases in all. The tests claim an order of
// grants and tokens, not a rate: the bound, 3 s a release, is only there
// to fail at last (a loaded machine's mutex took 0.7 s a hand-off, 15 in
// more than the 10 s it was once given).
func (e *env) waitReleases(n int) {
	e.t.Helper()
	e.rec.WaitFor(e.t, time.Duration(n)*3*time.Second, 0, "releases", func(histories.Op) bool {
		ops, _ := e.rec.Snapshot()
		return countOK(ops, histories.Release) >= n
	})
}

// waitOverlap waits until two processes believe they hold a lock at once.
func (e *env) waitOverlap(timeout time.Duration) checker.Overlap {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ops, _ := e.rec.Snapshot()
		if a := checker.Overlaps(ops); len(a.Overlaps) > 0 {
			return a.Overlaps[0]
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no overlap within %v; history:\n%s", timeout, recordtest.Dump(ops))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Every correct recipe hands the lock from client to client with growing
// tokens, and with the fenced resource every check passes.
func TestRecipes(t *testing.T) {
	t.Parallel()
	for _, b := range etcdlock.Builtins {
		name := b.Name
		if b.Broken {
			continue
		}
		t.Run(name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Clients = 3
			cfg.Recipe = recipe(t, name)
			cfg.Guard = workload.GuardSession
			e := setup(t, resource.Fenced, cfg)
			e.start()
			e.waitReleases(15)
			// A polling lock is unfair (the client that just released
			// usually wins again), more so on a loaded machine: wait for a
			// second client's grant rather than expect it by a count.
			e.rec.WaitFor(t, 20*time.Second, 0, "grants to two clients", func(histories.Op) bool {
				ops, _ := e.rec.Snapshot()
				procs := map[histories.Process]bool{}
				for _, op := range ops {
					if op.F == histories.Acquire && op.Type == histories.OK {
						procs[op.Process] = true
					}
				}
				return len(procs) >= 2
			})
			st, ops := e.finish()
			last := int64(0)
			procs := map[histories.Process]bool{}
			for _, op := range ops {
				if op.F == histories.Acquire && op.Type == histories.OK {
					if tok := tokenOf(op); tok <= last {
						t.Errorf("token %d granted after %d", tok, last)
					} else {
						last = tok
					}
					procs[op.Process] = true
				}
				if op.F == histories.Write && op.Type == histories.Fail {
					t.Errorf("write rejected in a quiet run: %+v", op)
				}
			}
			if len(procs) < 2 {
				t.Errorf("only %d processes acquired", len(procs))
			}
			for n, r := range results(ops) {
				if r.Verdict != checker.Valid {
					t.Errorf("%s: %s\n%s", n, r.Verdict, r.Explanation)
				}
			}
			t.Logf("%s: %d acquisitions, acquire p50 %v p99 %v", name, st.Acquisitions, st.AcquireP50.Round(time.Millisecond), st.AcquireP99.Round(time.Millisecond))
		})
	}
}

// check-then-set: waiters woken by the same delete all find the key absent
// and all Put it: two holders at once, without any fault.
func TestCheckThenSetCaught(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Clients = 3
	cfg.Recipe = recipe(t, etcdlock.CheckThenSetName)
	cfg.ThinkMin, cfg.ThinkMax = 20*time.Millisecond, 50*time.Millisecond
	e := setup(t, resource.Unfenced, cfg)
	e.start()
	o := e.waitOverlap(8 * time.Second)
	t.Logf("processes %d and %d held %q at once from %v", o.First.Process, o.Second.Process, o.Key, ms(o.From))
	_, ops := e.finish()
	r := results(ops)["mutex"]
	if r.Verdict != checker.Invalid {
		t.Fatalf("mutex check %s, want invalid", r.Verdict)
	}
	t.Logf("mutex: %s", firstLine(r.Explanation))
	// Two Puts on one key: the second holder was granted while the first
	// one's key was on the server.
	expectBroken(t, results(ops)["contract"], "promise 3")
}

// expectBroken fails unless the contract check is invalid with a violation
// of the promise kind ("promise 3").
func expectBroken(t *testing.T, r checker.Result, kind string) {
	t.Helper()
	if r.Verdict != checker.Invalid {
		t.Fatalf("contract %s, want invalid:\n%s", r.Verdict, r.Explanation)
	}
	for _, v := range r.Violations {
		if v.Kind == kind {
			t.Logf("contract: %s", v.Story)
			return
		}
	}
	t.Fatalf("contract broke no %s:\n%s", kind, r.Explanation)
}

// unlock-any: a holder paused past its lease comes back and releases by
// deleting the key, now another client's: the observer names the release
// that did it, and the contract check calls it a bug in the lock.
func TestUnlockAnyCaught(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Clients = 3
	cfg.Recipe = recipe(t, etcdlock.UnlockAnyName)
	// Sections long beside a release: when the paused holder wakes and
	// releases, the key it deletes is mostly another holder's. Now and
	// then that holder is itself releasing it at that moment (seen in CI
	// and under load: its own release deletes it first, and the woken
	// one's finds nothing), so a holder is paused again, up to three.
	cfg.ThinkMin, cfg.ThinkMax = 300*time.Millisecond, 400*time.Millisecond
	e := setup(t, resource.Fenced, cfg)
	e.start()
	otherRelease := func(op histories.Op) bool {
		return op.F == histories.FKeyDeleted && op.Value.Params["by"] == "other-release"
	}
	grant := e.firstGrant()
	for attempt := 1; ; attempt++ {
		ops, _ := e.rec.Snapshot()
		paused := e.clientOf(ops, grant.Process)
		if err := e.wl.Pause(paused, 5*time.Second, true); err != nil {
			t.Fatal(err)
		}
		if del, ok := e.rec.LookFor(10*time.Second, grant.Index, otherRelease); ok {
			t.Logf("%s's release deleted %v's key (process %s), pause %d", paused, del.Value.Targets, del.Value.Params["process"], attempt)
			break
		}
		if attempt == 3 {
			t.Fatalf("no key deleted by another client's release after %d pauses; history:\n%s", attempt, recordtest.Dump(ops))
		}
		ops, _ = e.rec.Snapshot()
		grant = e.rec.WaitFor(t, 5*time.Second, len(ops), "a grant", func(op histories.Op) bool {
			return op.Type == histories.OK && op.F == histories.Acquire
		})
	}
	_, ops := e.finish()
	if r := results(ops)["mutex"]; r.Verdict != checker.Invalid {
		t.Fatalf("mutex check %s, want invalid", r.Verdict)
	}
	expectBroken(t, results(ops)["contract"], "promise 4")
}

// no-renew: critical sections longer than the TTL outlive the lock.
func TestNoRenewCaught(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.TTL = 1
	cfg.Recipe = recipe(t, etcdlock.NoRenewName)
	cfg.ThinkMin, cfg.ThinkMax = 1500*time.Millisecond, 1500*time.Millisecond
	e := setup(t, resource.Fenced, cfg)
	e.start()
	o := e.waitOverlap(8 * time.Second)
	t.Logf("processes %d and %d held %q at once from %v", o.First.Process, o.Second.Process, o.Key, ms(o.From))
	_, ops := e.finish()
	expired := false
	for _, op := range ops {
		if op.F == histories.FKeyDeleted && op.Value.Params["by"] == "expiry" {
			expired = true
		}
	}
	if !expired {
		t.Error("no key-deleted by expiry")
	}
	if r := results(ops)["mutex"]; r.Verdict != checker.Invalid {
		t.Fatalf("mutex check %s, want invalid", r.Verdict)
	}
	// Without any fault, the holders' leases ran out. Where the host did
	// not run locktest's own process for a quarter of the TTL before each
	// expiry (two suites and sweeps at once, load average 30-54), promise 5
	// is rightly left unjudged: no expiry was judged, so nothing to test.
	r := results(ops)["contract"]
	if r.Verdict == checker.Unknown && strings.Contains(r.Explanation, "was not run for") {
		t.Skipf("every expiry came after a stall of locktest's own process, which leaves promise 5 unjudged:\n%s", r.Explanation)
	}
	expectBroken(t, r, "promise 5")
}

// contending starts three clients of recipe taking turns on one lock,
// each holding it 50-100 ms.
func contending(t *testing.T, name string) *env {
	t.Helper()
	cfg := testConfig()
	cfg.Clients = 3
	cfg.Recipe = recipe(t, name)
	cfg.ThinkMin, cfg.ThinkMax = 50*time.Millisecond, 100*time.Millisecond
	e := setup(t, resource.Fenced, cfg)
	e.start()
	return e
}

// firstGrant waits for the run's first granted acquire.
func (e *env) firstGrant() histories.Op {
	e.t.Helper()
	return e.rec.WaitFor(e.t, 5*time.Second, 0, "an acquire", func(op histories.Op) bool {
		return op.Type == histories.OK && op.F == histories.Acquire
	})
}

// pauseFirstHolder pauses the first of two clients to acquire before its
// write, past its lease: until the other client has been granted the lock
// and written. It returns the paused client's last grant then and the
// index its pause began at.
func (e *env) pauseFirstHolder() (held histories.Op, from int) {
	t := e.t
	t.Helper()
	first := e.firstGrant()
	name := nameOf(first.Process)
	if err := e.wl.Pause(name, 2*time.Second, true); err != nil {
		t.Fatal(err)
	}
	e.waitPaused(name)
	ops, _ := e.rec.Snapshot()
	for _, op := range ops {
		if op.Process == first.Process && op.F == histories.Acquire && op.Type == histories.OK {
			held = op
		}
	}
	from = len(ops)
	other := histories.Process(1 - int(first.Process))
	e.pausedUntil(name, from, "the other client's write", isOp(histories.OK, histories.Write, other))
	return held, from
}

// etcd-txn: a holder paused between its guard and its write past its lease
// writes with a Txn whose compare (mutex.IsOwner) fails: rejected, and the
// resource and invariant checks pass; the mutex check still sees the
// overlap.
func TestEtcdTxnRejectsPausedHolder(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.ThinkMin, cfg.ThinkMax = 20*time.Millisecond, 20*time.Millisecond
	e := setup(t, TxnMode, cfg)
	e.start()
	held, from := e.pauseFirstHolder()
	w := e.rec.WaitFor(t, 5*time.Second, from, "the paused client's write", func(op histories.Op) bool {
		return op.Process == held.Process && op.F == histories.Write && op.Type != histories.Invoke
	})
	if w.Type != histories.Fail || tokenOf(w) != tokenOf(held) {
		t.Errorf("paused holder's write: %+v, want a fail with token %d", w, tokenOf(held))
	}
	t.Logf("stale write: %s", w.Error)
	_, ops := e.finish()
	r := results(ops)
	for _, n := range []string{"resource", "invariant"} {
		if r[n].Verdict != checker.Valid {
			t.Errorf("%s: %s\n%s", n, r[n].Verdict, r[n].Explanation)
		}
	}
	if r["mutex"].Verdict != checker.Invalid {
		t.Errorf("mutex: %s, want invalid (the paused holder overlapped)", r["mutex"].Verdict)
	}
	// The value in etcd is the final read's.
	cli, err := e.cl.Client("check")
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	v, err := NewTxn(cli, TxnPrefix(cfg.Prefix)).Read(context.Background(), "lock", 0)
	if err != nil {
		t.Fatal(err)
	}
	if final := finalRead(t, ops, "lock"); final != v {
		t.Errorf("final read %d, etcd holds %d", final, v)
	}
}

func finalRead(t *testing.T, ops []histories.Op, key string) int64 {
	t.Helper()
	for i := len(ops) - 1; i >= 0; i-- {
		if op := ops[i]; op.F == histories.Read && op.Type == histories.OK && op.Key == key {
			v, _ := op.Val()
			return v
		}
	}
	t.Fatal("no final read")
	return 0
}

// A recipe without a compare of its own (no etcdlock.Fenced) is fenced in etcd
// by its token.
func TestEtcdTxnTokenFenceForPlainRecipe(t *testing.T) {
	t.Parallel()
	plain := lock.RecipeFunc("plain", func(ctx context.Context, env lock.Env) (lock.Locker, error) {
		l, err := etcdlock.Mutex().New(ctx, env)
		if err != nil {
			return nil, err
		}
		return wrapLocker{l, func(h lock.Held) lock.Held { return plainHeld{h} }}, nil
	})
	cfg := testConfig()
	cfg.Recipe = plain
	e := setup(t, TxnMode, cfg)
	e.start()
	e.waitReleases(10)
	_, ops := e.finish()
	if countOK(ops, histories.Write) < 10 {
		t.Errorf("only %d writes accepted", countOK(ops, histories.Write))
	}
	for n, r := range results(ops) {
		if n == "contract" {
			// Without etcdlock.Keyed, the grants' keys are unknown.
			if r.Verdict != checker.Unknown || !slices.Contains(r.Unjudged, "2 (no grant of a lost lock)") {
				t.Errorf("contract: %s, unjudged %q; want unknown, promise 2 not judged", r.Verdict, r.Unjudged)
			}
			continue
		}
		if r.Verdict != checker.Valid {
			t.Errorf("%s: %s\n%s", n, r.Verdict, r.Explanation)
		}
	}
}

// wrapLocker hides everything of a Locker but its methods, and wraps its
// Helds.
type wrapLocker struct {
	l    lock.Locker
	wrap func(lock.Held) lock.Held
}

func (w wrapLocker) Close() error { return w.l.Close() }
func (w wrapLocker) Acquire(ctx context.Context, name string) (lock.Held, error) {
	h, err := w.l.Acquire(ctx, name)
	if err != nil {
		return nil, err
	}
	return w.wrap(h), nil
}

// plainHeld hides everything but the Held methods.
type plainHeld struct{ h lock.Held }

func (p plainHeld) Token() int64                      { return p.h.Token() }
func (p plainHeld) Release(ctx context.Context) error { return p.h.Release(ctx) }

// The stock workload in a quiet run sells exactly its items, then finds
// itself sold out; the invariant holds.
func TestStockQuiet(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Clients = 3
	cfg.Workload = histories.WorkloadStock
	cfg.Items = 6
	e := setup(t, resource.Fenced, cfg)
	e.start()
	e.waitReleases(10)
	st, ops := e.finish()
	if st.Sales != 6 || st.SoldOut == 0 {
		t.Errorf("sales %d, sold out %d; want 6 sales, then sold out", st.Sales, st.SoldOut)
	}
	if ops[0].F != histories.FSetup || ops[0].Value.Params["workload"] != "stock" || ops[0].Value.Params["items"] != "6" {
		t.Errorf("first op %+v, want the setup event", ops[0])
	}
	r := results(ops)
	for n, res := range r {
		if res.Verdict != checker.Valid {
			t.Errorf("%s: %s\n%s", n, res.Verdict, res.Explanation)
		}
	}
	c := checker.Build(ops).InvariantCounts()
	if len(c) != 1 || c[0].Accepted != 6 || c[0].Final != 6 || c[0].Items != 6 {
		t.Errorf("counts %+v", c)
	}
}

// The stock workload on the unfenced resource: a holder paused before its
// write past its lease writes its stale count back; the invariant check
// says how many sales were lost.
func TestStockUnfencedLosesSales(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Workload = histories.WorkloadStock
	cfg.ThinkMin, cfg.ThinkMax = 20*time.Millisecond, 20*time.Millisecond
	e := setup(t, resource.Unfenced, cfg)
	e.start()
	held, from := e.pauseFirstHolder()
	w := e.rec.WaitFor(t, 6*time.Second, from, "the paused client's write", func(op histories.Op) bool {
		return op.Process == held.Process && op.F == histories.Write && op.Type != histories.Invoke
	})
	if w.Type != histories.OK {
		t.Fatalf("stale write %+v, want accepted", w)
	}
	st, ops := e.finish()
	r := results(ops)["invariant"]
	if r.Verdict != checker.Invalid {
		t.Fatalf("invariant %s, want invalid\n%s", r.Verdict, r.Explanation)
	}
	c := checker.Build(ops).InvariantCounts()[0]
	if c.Lost < 1 || c.Accepted != int64(st.Sales) || c.Final != c.Accepted-c.Lost {
		t.Errorf("counts %+v, stats sales %d", c, st.Sales)
	}
	if !strings.Contains(r.Explanation, "lost from the count") {
		t.Errorf("explanation: %s", r.Explanation)
	}
	t.Logf("invariant: %s", r.Explanation)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// A lock that tells only the key its grant holds (lock.Keyed), as a lock in
// another process does: etcd finds the key's lease on the server, so the
// history names each grant's claim, the observer attributes each release
// to its client, and the contract is judged in full. The recipe gets the
// client's own links as host:port, one per member.
func TestKeyOnlyGrant(t *testing.T) {
	t.Parallel()
	var endpoints []string
	var backend string
	cfg := testConfig()
	cfg.Recipe = lock.RecipeFunc("key-only", func(ctx context.Context, env lock.Env) (lock.Locker, error) {
		endpoints, backend = env.Endpoints, env.Backend
		l, err := etcdlock.Mutex().New(ctx, env)
		if err != nil {
			return nil, err
		}
		return wrapLocker{l, func(h lock.Held) lock.Held { return keyOnlyHeld{plainHeld{h}} }}, nil
	})
	e := setup(t, resource.Fenced, cfg)
	e.start()
	e.waitReleases(10)
	_, ops := e.finish()
	if len(endpoints) != 3 || !strings.Contains(endpoints[0], ":") || strings.Contains(endpoints[0], "/") || backend != Name {
		t.Errorf("the recipe's backend %q, endpoints %v; want %s and 3 host:port links", backend, endpoints, Name)
	}
	for _, op := range ops {
		if op.F == histories.Acquire && op.Type == histories.OK && op.Value.Claim == "" {
			t.Fatalf("a grant without its claim: %+v", op)
		}
	}
	released := 0
	for _, op := range ops {
		if op.F != histories.FKeyDeleted || op.Value.Params["by"] != histories.DeletedByRelease {
			continue
		}
		released++
		if len(op.Value.Targets) != 1 || op.Value.Params["process"] == "" || op.Value.Params["lease"] == "0" {
			t.Errorf("a release's deletion not attributed: %+v", op.Value)
		}
	}
	if released < 10 {
		t.Errorf("%d deletions attributed to releases, want at least 10", released)
	}
	if r := results(ops)["contract"]; r.Verdict != checker.Valid {
		t.Errorf("contract %s, want valid:\n%s", r.Verdict, r.Explanation)
	}
}

// keyOnlyHeld tells its key, and nothing else a Held may.
type keyOnlyHeld struct{ plainHeld }

func (k keyOnlyHeld) Key() string { return k.h.(lock.Keyed).Key() }
