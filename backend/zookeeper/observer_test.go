package zookeeper

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/locktest/locktest/backend/zookeeper/txnlog"
	"github.com/locktest/locktest/backend/zookeeper/zklock"
	"github.com/locktest/locktest/backend/zookeeper/zkserver"
	"github.com/locktest/locktest/clock"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/polltest"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/workload"
)

// memRecorder keeps what is recorded.
type memRecorder struct {
	mu  sync.Mutex
	ops []histories.Op
}

func (r *memRecorder) Record(op histories.Op) (histories.Op, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	op.Index = len(r.ops)
	r.ops = append(r.ops, op)
	return op, nil
}

// deleted returns the key-deleted event of node (a child's name), if any.
func (r *memRecorder) deleted(node string) (histories.Op, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, op := range r.ops {
		if op.F == histories.FKeyDeleted && op.Value.Params["node"] == node {
			return op, true
		}
	}
	return histories.Op{}, false
}

// testEnsemble is the ZooKeeper ensemble the observer tests share (three server
// JVMs to start): each keeps to a prefix of its own. Started by the first
// test that needs it, closed by TestMain.
var testEnsemble struct {
	once sync.Once
	dir  string
	e    *zkserver.Ensemble
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if testEnsemble.e != nil {
		testEnsemble.e.Close()
	}
	if testEnsemble.dir != "" {
		os.RemoveAll(testEnsemble.dir)
	}
	os.Exit(code)
}

func sharedEnsemble(t *testing.T) *zkserver.Ensemble {
	t.Helper()
	in := zkserver.ForTest(t)
	testEnsemble.once.Do(func() {
		if testEnsemble.dir, testEnsemble.err = os.MkdirTemp("", "zookeeper-observer-test-"); testEnsemble.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		testEnsemble.e, testEnsemble.err = zkserver.Start(ctx, zkserver.Config{Servers: 3, Dir: testEnsemble.dir,
			LogDir: filepath.Join(testEnsemble.dir, "logs"), Install: in})
	})
	if testEnsemble.err != nil {
		t.Fatal(testEnsemble.err)
	}
	return testEnsemble.e
}

// ownEnsemble starts an ensemble of t's own, for a test that stops its
// servers, closed when t ends.
func ownEnsemble(t *testing.T) *zkserver.Ensemble {
	t.Helper()
	in := zkserver.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	e, err := zkserver.Start(ctx, zkserver.Config{Servers: 3, Dir: dir, LogDir: filepath.Join(dir, "logs"), Install: in})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// observe returns the shared ensemble's backend and an observer of lock
// "lock" under prefix, closed when t ends.
func observe(t *testing.T, prefix string) (workload.Backend, workload.Observer, *memRecorder) {
	t.Helper()
	b := Workload(sharedEnsemble(t))
	rec := &memRecorder{}
	obs, err := b.Observe(context.Background(), workload.Keys{Prefix: prefix, Locks: []string{"lock"}}, rec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { obs.Close() })
	return b, obs, rec
}

// A client of a run: its connection, and a locker of zk-lock noted as its
// process p's, as the workload does.
type testClient struct {
	conn   workload.Conn
	locker *zklock.Mutex
	p      histories.Process
}

// Its sessions ask for ttl seconds: 2 for the one whose expiry a test
// waits for, 20 for the others, which a loaded machine's stalls would
// otherwise end (TestObserver's c0 lost its 2 s session at load ~45).
func newTestClient(t *testing.T, b workload.Backend, prefix, name string, p histories.Process, ttl int) *testClient {
	t.Helper()
	cn, err := b.Connect(workload.Client{Name: name, Clock: clock.New(), Paused: func(ctx context.Context) error { return ctx.Err() }})
	if err != nil {
		t.Fatal(err)
	}
	env := lock.Env{Conn: cn.Env(), Prefix: prefix, Name: name, TTL: ttl, Backend: Name, Endpoints: cn.Endpoints()}
	l, err := zklock.Recipe(zklock.LockName, zklock.Options{}).New(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	cn.Locker(l, p)
	t.Cleanup(func() { l.Close() })
	return &testClient{conn: cn, locker: l.(*zklock.Mutex), p: p}
}

func (c *testClient) acquire(t *testing.T, ctx context.Context) (*zklock.Held, workload.Grant) {
	t.Helper()
	h, err := c.locker.Acquire(ctx, "lock")
	if err != nil {
		t.Fatal(err)
	}
	return h.(*zklock.Held), c.conn.Granted(c.locker, h, c.p)
}

func child(h *zklock.Held) string { return filepath.Base(h.Key()) }

// The observer tells each lock znode's deletion from the servers'
// transaction logs: at which zxid, created at which (the token), whose,
// and why: the holder's release, an acquire's clean-up, another client's
// delete, its session's expiry, its client's close.
func TestObserver(t *testing.T) {
	t.Parallel()
	const prefix = "/locktest/observer/"
	b, obs, rec := observe(t, prefix)
	ctx := context.Background()
	cs := make([]*testClient, 5)
	for i := range cs {
		ttl := 20
		if i == 4 { // orphaned below: its session expires
			ttl = 2
		}
		cs[i] = newTestClient(t, b, prefix, "c"+strconv.Itoa(i), histories.Process(10+i), ttl)
	}
	expect := func(h *zklock.Held, by string, owner *testClient, more map[string]string) {
		t.Helper()
		var op histories.Op
		polltest.Until(t, 10*time.Second, "the deletion of "+child(h), func() bool {
			var ok bool
			op, ok = rec.deleted(child(h))
			return ok
		})
		p := op.Value.Params
		want := map[string]string{"by": by, "key": "lock", "create_revision": strconv.FormatInt(h.Token(), 10),
			"lease": sessionHex(h.SessionID()), "process": owner.p.String()}
		for k, v := range more {
			want[k] = v
		}
		for k, v := range want {
			if p[k] != v {
				t.Errorf("%s's deletion: %s=%q, want %q (%v)", child(h), k, p[k], v, p)
			}
		}
		if rev, _ := strconv.ParseInt(p["revision"], 10, 64); rev <= h.Token() {
			t.Errorf("%s deleted at zxid %d, not after its creation %d", child(h), rev, h.Token())
		}
		if len(op.Value.Targets) != 1 || op.Value.Targets[0] != owner.conn.(*conn).name {
			t.Errorf("%s's deletion names %v", child(h), op.Value.Targets)
		}
	}

	// c0's release.
	h, g := cs[0].acquire(t, ctx)
	g.Releasing()
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	g.Released(nil)
	expect(h, histories.DeletedByRelease, cs[0], map[string]string{"lease_alive": "true"})

	// c1 holds; c2 gives up waiting: its Acquire deletes its node.
	h1, _ := cs[1].acquire(t, ctx)
	wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	if _, err := cs[2].locker.Acquire(wctx, "lock"); err == nil {
		t.Fatal("c2 was granted a held lock")
	}
	cancel()
	polltest.Until(t, 10*time.Second, "c2's clean-up", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, op := range rec.ops {
			if op.F == histories.FKeyDeleted && op.Value.Params["by"] == histories.DeletedByAcquire &&
				op.Value.Params["lease"] == sessionHex(cs[2].locker.SessionID()) {
				return true
			}
		}
		return false
	})

	// c3 deletes c1's node: another client's release, definite.
	if err := cs[3].locker.Conn.Delete(h1.Key(), -1); err != nil {
		t.Fatal(err)
	}
	expect(h1, histories.DeletedByOther, cs[1], map[string]string{"released_by": "c3", "lease_alive": "true"})

	// c4's session is orphaned (a crashed client): expiry.
	h4, _ := cs[4].acquire(t, ctx)
	cs[4].locker.Orphan()
	expect(h4, histories.DeletedByExpiry, cs[4], map[string]string{"lease_alive": "false"})

	// c0 closes its locker: its session's close.
	h0, _ := cs[0].acquire(t, ctx)
	if err := cs[0].conn.CloseLocker(cs[0].locker); err != nil {
		t.Fatal(err)
	}
	expect(h0, histories.DeletedByRevoke, cs[0], map[string]string{"lease_alive": "false"})

	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := obs.Sync(sctx); err != nil {
		t.Fatal(err)
	}
	obs.RecordObserved()
	rec.mu.Lock()
	last := rec.ops[len(rec.ops)-1]
	var newest int64
	for _, op := range rec.ops {
		if op.F == histories.FKeyDeleted {
			rev, _ := strconv.ParseInt(op.Value.Params["revision"], 10, 64)
			newest = max(newest, rev)
		}
	}
	rec.mu.Unlock()
	if observed, _ := strconv.ParseInt(last.Value.Params["revision"], 10, 64); last.F != histories.FObserved || observed < newest {
		t.Errorf("observed %v, after deletions up to zxid %d", last, newest)
	}
	if err := obs.Err(); err != nil {
		t.Error(err)
	}
}

// Sync waits for what was committed before it, however far the logs are
// behind: a deletion made just before Sync is recorded when it returns.
func TestObserverSync(t *testing.T) {
	t.Parallel()
	const prefix = "/locktest/sync/"
	b, obs, rec := observe(t, prefix)
	ctx := context.Background()
	c := newTestClient(t, b, prefix, "c0", 0, 20)
	for range 20 {
		h, _ := c.acquire(t, ctx)
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := obs.Sync(sctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := rec.deleted(child(h)); !ok {
			t.Fatalf("Sync returned before the deletion of %s was recorded", child(h))
		}
	}
}

// A node deleted by a session other than its owner's is another client's
// release only when that session is known to be another client's: Curator,
// once it has declared its session expired, makes a new one and deletes
// its old node from it (a curator-mutex run under --nemesis all, seed 9,
// told that as promise 4).
func TestDeletedBySessionOfWhom(t *testing.T) {
	rec := &memRecorder{}
	o := &observer{rec: rec, notes: newNotes(), nodes: map[string]node{}}
	o.notes.session(1, "c1", 1)
	o.notes.session(3, "c1", 4) // c1's later session
	o.notes.session(2, "c2", 2)
	for i, tc := range []struct {
		deleter int64
		by      string
	}{
		{9, ""}, // a session no client was seen on
		{3, histories.DeletedByRelease},
		{2, histories.DeletedByOther},
	} {
		path := "/l/lock/n" + strconv.Itoa(i)
		o.nodes[path] = node{czxid: int64(10 + i), owner: 1}
		o.notes.granted(path)
		o.deleted(txnlog.Txn{Session: tc.deleter, Cxid: 5, Zxid: int64(20 + i), Type: txnlog.TypeDelete, Path: path}, path, "lock", "n"+strconv.Itoa(i))
		got := rec.ops[len(rec.ops)-1].Value.Params["by"]
		if got != tc.by {
			t.Errorf("deleted by session %d: by %q, want %q", tc.deleter, got, tc.by)
		}
	}
}

// When a session deletes its own node, never granted, after its acquire
// gave up, the observer says whether the head of the queue was then an
// older node of the same session, never granted (ZOOKEEPER-1262's ghost):
// not when the head is another session's, or was granted, or when a
// creation in the lock before the delete is logged but not yet trusted.
func TestHeadOwn(t *testing.T) {
	for _, tc := range []struct {
		name      string
		headOwner int64
		granted   bool
		pending   bool
		want      string
	}{
		{"the session's own", 1, false, false, "lock-0000000013"},
		{"another session's", 2, false, false, ""},
		{"granted", 1, true, false, ""},
		{"a creation not yet trusted", 1, false, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &memRecorder{}
			o := &observer{prefix: "/l/", locks: map[string]bool{"lock": true}, rec: rec, notes: newNotes(),
				nodes: map[string]node{}, pending: map[int64]*logged{}}
			o.notes.session(1, "c1", 1)
			o.notes.session(2, "c2", 2)
			o.nodes["/l/lock/lock-0000000013"] = node{czxid: 13, owner: tc.headOwner}
			o.nodes["/l/lock/lock-0000000014"] = node{czxid: 14, owner: 2}
			o.nodes["/l/other/lock-0000000001"] = node{czxid: 1, owner: 2} // another lock's queue
			o.nodes["/l/lock/lock-0000000015"] = node{czxid: 15, owner: 1}
			if tc.granted {
				o.notes.granted("/l/lock/lock-0000000013")
			}
			if tc.pending {
				o.pending[12] = &logged{txn: txnlog.Txn{Zxid: 12, Type: txnlog.TypeCreate, Path: "/l/lock/lock-0000000012"}}
			}
			o.locks["other"] = true
			path := "/l/lock/lock-0000000015"
			o.deleted(txnlog.Txn{Session: 1, Cxid: 7, Zxid: 20, Type: txnlog.TypeDelete, Path: path}, path, "lock", "lock-0000000015")
			p := rec.ops[len(rec.ops)-1].Value.Params
			if p["by"] != histories.DeletedByAcquire || p["head_own"] != tc.want {
				t.Fatalf("by %q, head_own %q; want %q, %q", p["by"], p["head_own"], histories.DeletedByAcquire, tc.want)
			}
			if tc.want != "" && p["head_own_revision"] != "13" {
				t.Errorf("head_own_revision %q, want 13", p["head_own_revision"])
			}
		})
	}
}

// The observer says, of a node deleted while it headed its lock's queue,
// after which deletion it did at the latest (head_since): not of a node
// that headed the queue from its creation, nor when an older node's
// creation was trusted after it, nor while one is logged but not yet
// trusted.
func TestHeadSince(t *testing.T) {
	create := func(z, session int64) txnlog.Txn {
		return txnlog.Txn{Session: session, Zxid: z, Type: txnlog.TypeCreate, Path: "/l/lock/n-" + strconv.FormatInt(z, 10)}
	}
	del := func(z, session, created int64) txnlog.Txn {
		return txnlog.Txn{Session: session, Cxid: 3, Zxid: z, Type: txnlog.TypeDelete, Path: "/l/lock/n-" + strconv.FormatInt(created, 10)}
	}
	for _, tc := range []struct {
		name string
		txns []txnlog.Txn
		want []string // head_since of each deletion, in order
	}{
		{"behind a deleted node", []txnlog.Txn{create(13, 2), create(14, 1), del(20, 2, 13), del(25, 1, 14)}, []string{"", "20"}},
		{"headed when created", []txnlog.Txn{create(13, 2), del(20, 2, 13), create(21, 1), del(25, 1, 21)}, []string{"", ""}},
		{"an older node trusted late", []txnlog.Txn{create(13, 2), create(14, 1), del(20, 2, 13), create(12, 3), del(25, 1, 14)}, []string{"", ""}},
		{"another lock's node", []txnlog.Txn{create(13, 2), {Session: 3, Zxid: 15, Type: txnlog.TypeCreate, Path: "/l/other/n-15"}, create(16, 1), del(20, 2, 13), del(25, 1, 16)}, []string{"", "20"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &memRecorder{}
			o := &observer{prefix: "/l/", locks: map[string]bool{"lock": true, "other": true}, rec: rec, notes: newNotes(),
				nodes: map[string]node{}, pending: map[int64]*logged{}}
			for _, tx := range tc.txns {
				o.apply(tx)
			}
			var got []string
			for _, op := range rec.ops {
				got = append(got, op.Value.Params["head_since"])
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("head_since %q, want %q", got, tc.want)
			}
		})
	}
	// A creation before the head's logged but not yet trusted.
	rec := &memRecorder{}
	o := &observer{prefix: "/l/", locks: map[string]bool{"lock": true}, rec: rec, notes: newNotes(),
		nodes: map[string]node{}, pending: map[int64]*logged{12: {txn: create(12, 3)}}}
	for _, tx := range []txnlog.Txn{create(13, 2), create(14, 1), del(20, 2, 13), del(25, 1, 14)} {
		o.apply(tx)
	}
	if got := rec.ops[1].Value.Params["head_since"]; got != "" {
		t.Errorf("with an older creation not yet trusted: head_since %q, want none", got)
	}
}

// The observer's queue of a lock is its nodes' clients, oldest first, as
// of its last pass: "" for a session no client was seen on.
func TestQueue(t *testing.T) {
	o := &observer{prefix: "/l/", locks: map[string]bool{"lock": true, "other": true}, rec: &memRecorder{}, notes: newNotes(),
		nodes: map[string]node{}, pending: map[int64]*logged{}}
	o.notes.session(1, "c1", 1)
	o.notes.session(2, "c2", 2)
	for _, tx := range []txnlog.Txn{
		{Session: 2, Zxid: 13, Type: txnlog.TypeCreate, Path: "/l/lock/n-13"},
		{Session: 9, Zxid: 14, Type: txnlog.TypeCreate, Path: "/l/lock/n-14"},
		{Session: 1, Zxid: 15, Type: txnlog.TypeCreate, Path: "/l/other/n-15"},
		{Session: 1, Zxid: 16, Type: txnlog.TypeCreate, Path: "/l/lock/n-16"},
	} {
		o.apply(tx)
	}
	o.queues = o.lockQueues()
	if got, want := o.Queue("lock"), []string{"c2", "", "c1"}; !slices.Equal(got, want) {
		t.Errorf("queue %q, want %q", got, want)
	}
	if got := o.Queue("none"); len(got) != 0 {
		t.Errorf("a lock with no nodes: queue %q", got)
	}
}

// The observer rides out an outage of the whole ensemble: it needs no
// server to start (a follower that lost its leader dropped the marker's
// connection as the observer made it, and the run ended with "observer:
// zk: connection closed": WriteLock seeds 1 and 4 at load 29), and once
// the servers are back it records what they logged, and Sync reaches it.
func TestObserverOutage(t *testing.T) {
	t.Parallel()
	e := ownEnsemble(t)
	for i := range e.Servers() {
		if err := e.Kill(i); err != nil {
			t.Fatal(err)
		}
	}
	b := Workload(e)
	rec := &memRecorder{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	obs, err := b.Observe(ctx, workload.Keys{Prefix: "/locktest/locks/", Locks: []string{"lock"}}, rec)
	cancel()
	if err != nil {
		t.Fatalf("observing an ensemble that is down: %v", err)
	}
	t.Cleanup(obs.Close)
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range e.Servers() {
		if err := e.Restart(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	c := newTestClient(t, b, "/locktest/locks/", "c0", 0, 20)
	h, _ := c.acquire(t, ctx)
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := obs.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := rec.deleted(child(h)); !ok {
		t.Fatalf("Sync returned before the deletion of %s was recorded", child(h))
	}
	if err := obs.Err(); err != nil {
		t.Fatal(err)
	}
}
