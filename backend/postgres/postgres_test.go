package postgres

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/backend/postgres/pglock"
	"github.com/locktest/locktest/backend/postgres/pgserver"
	"github.com/locktest/locktest/clock"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/polltest"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/system"
	"github.com/locktest/locktest/workload"
)

// recorder keeps the observer's events.
type recorder struct {
	mu  sync.Mutex
	ops []histories.Op
}

func (r *recorder) Record(op histories.Op) (histories.Op, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op)
	return op, nil
}

// deletion returns the key-deleted event of token, if recorded.
func (r *recorder) deletion(token int64) (histories.Op, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, op := range r.ops {
		if op.F == histories.FKeyDeleted && op.Value.Params["create_revision"] == strconv.FormatInt(token, 10) {
			return op, true
		}
	}
	return histories.Op{}, false
}

// On a real server, through the backend's seam: c1 holds pg-advisory and
// releases it (the observer says: released), takes it again and is cut
// off; the server ends its silent session after the idle timeout (the
// observer says: expiry, the session ended), and c2 is granted the lock
// with a higher token while c1 still believes. Then pg-lease's tokens
// grow across a release.
func TestAdvisoryThroughTheSeam(t *testing.T) {
	pgserver.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opts := &Options{IdleTimeout: time.Second}
	started, err := opts.Start(ctx, backend.Plan{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer started.Close()
	rec := &recorder{}
	keys := workload.Keys{Prefix: "t/", Locks: []string{"L"}}
	obs, err := started.Workload.Observe(ctx, keys, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()

	locker := func(name, recipe string) (workload.Conn, lock.Locker) {
		c, err := started.Workload.Connect(workload.Client{Name: name, Clock: clock.New(), Paused: func(context.Context) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		r, _, _ := pglockBuiltin(recipe)
		l, err := r.New(ctx, lock.Env{Conn: c.Env(), Clock: clock.New(), TTL: 1, Prefix: keys.Prefix, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		return c, l
	}
	c1, l1 := locker("c1", pglock.AdvisoryName)
	h, err := l1.Acquire(ctx, "L")
	if err != nil {
		t.Fatal(err)
	}
	g := c1.Granted(l1, h, 1)
	if err := obs.Sync(ctx); err != nil { // the observer sees the lock held
		t.Fatal(err)
	}
	g.Releasing()
	err = h.Release(ctx)
	g.Released(err)
	if err != nil {
		t.Fatal(err)
	}
	if err := obs.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if d, ok := rec.deletion(h.Token()); !ok || d.Value.Params["by"] != histories.DeletedByRelease {
		t.Fatalf("the release of token %d: observed %+v (%v), want by=release", h.Token(), d.Value, ok)
	}

	h1, err := l1.Acquire(ctx, "L")
	if err != nil {
		t.Fatal(err)
	}
	c1.Granted(l1, h1, 1)
	if err := obs.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	links, err := started.System.(system.Linker).Links("c1")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"upstream", "downstream"} {
		if _, err := links[0].AddToxic("cut-"+dir, "timeout", dir, 1, map[string]any{"timeout": 0}); err != nil {
			t.Fatal(err)
		}
	}
	c2, l2 := locker("c2", pglock.AdvisoryName)
	defer l2.Close()
	h2, err := l2.Acquire(ctx, "L")
	if err != nil {
		t.Fatal(err)
	}
	c2.Granted(l2, h2, 2)
	if h2.Token() <= h1.Token() {
		t.Errorf("c2's token %d is not above c1's %d", h2.Token(), h1.Token())
	}
	if err := obs.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	d, ok := rec.deletion(h1.Token())
	if !ok || d.Value.Params["by"] != histories.DeletedByExpiry || d.Value.Params["ended"] != "idle-session timeout" || d.Value.Targets[0] != "c1" {
		t.Fatalf("c1's cut-off session: observed %+v (%v), want the server ending c1's session", d.Value, ok)
	}

	_, ll := locker("c3", pglock.LeaseName)
	defer ll.Close()
	var last int64
	for range 2 {
		h, err := ll.Acquire(ctx, "L")
		if err != nil {
			t.Fatal(err)
		}
		if h.Token() <= last {
			t.Fatalf("pg-lease token %d after %d", h.Token(), last)
		}
		last = h.Token()
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func pglockBuiltin(name string) (lock.Recipe, bool, error) {
	for _, b := range pglock.Builtins {
		if b.Name == name {
			return b.New(), b.Broken, nil
		}
	}
	return nil, false, nil
}

// A run that fails over gets the replica, and only such a run: after the
// failover the next client is granted, on the promoted replica, the lock
// the first still holds, with a greater token, and the observer, which
// follows the new primary, records the first grant's end.
func TestFailoverThroughTheSeam(t *testing.T) {
	pgserver.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	opts := &Options{IdleTimeout: 10 * time.Second}
	plain := backend.Plan{Recipe: pglock.AdvisoryName, Families: []string{"pause", "crash", nemesis.Isolate}}
	if n, err := opts.Plan(plain); err != nil || len(n) != 1 || system.Has(opts.Prototype(plain), system.CapFailover) {
		t.Fatalf("without a failover: members %q (%v), failover offered %v; want one server",
			n, err, system.Has(opts.Prototype(plain), system.CapFailover))
	}
	p := backend.Plan{Recipe: pglock.AdvisoryName, Families: []string{nemesis.Failover}, Dir: t.TempDir()}
	planned, err := opts.Plan(p)
	if err != nil || len(planned) != 2 || !system.Has(opts.Prototype(p), system.CapFailover) {
		t.Fatalf("with a failover: members %q (%v); want a primary and its replica, failover offered", planned, err)
	}
	started, err := opts.Start(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	defer started.Close()
	if got := started.System.MemberNames(); !slices.Equal(got, planned) {
		t.Fatalf("members %v, planned %v", got, planned)
	}
	rec := &recorder{}
	keys := workload.Keys{Prefix: "t/", Locks: []string{"L"}}
	obs, err := started.Workload.Observe(ctx, keys, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	acquire := func(name string) int64 {
		c, err := started.Workload.Connect(workload.Client{Name: name, Clock: clock.New(), Paused: func(context.Context) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		r, _, _ := pglockBuiltin(pglock.AdvisoryName)
		l, err := r.New(ctx, lock.Env{Conn: c.Env(), Clock: clock.New(), TTL: 10, Prefix: keys.Prefix, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		h, err := l.Acquire(ctx, "L")
		if err != nil {
			t.Fatal(err)
		}
		c.Granted(l, h, 1)
		return h.Token()
	}
	first := acquire("c1")
	if err := obs.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// The replica has the sequence's WAL before the cut: a cut just after
	// a grant's nextval loses it, and the promoted replica gives its token
	// again (async replication, as it is).
	replica, err := started.System.(*replicatedPG).s.ConnectMember(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer replica.Close(context.Background())
	polltest.Until(t, 30*time.Second, "the replica to replay the token's nextval", func() bool {
		var caught bool
		err := replica.QueryRow(ctx, "SELECT is_called AND last_value >= $1 FROM locktest_fence", first).Scan(&caught)
		return err == nil && caught
	})
	f := started.System.(system.Failoverer)
	if err := f.CutReplication(); err != nil {
		t.Fatal(err)
	}
	pr, err := f.Failover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("promoted in %v: %s", pr.Took, pr.How)
	if f.FailedOver() == "" {
		t.Error("a second failover is offered")
	}
	if second := acquire("c2"); second <= first {
		t.Errorf("token %d on the promoted replica, not past %d", second, first)
	}
	polltest.Until(t, 10*time.Second, "the observer to record c1's lock gone", func() bool {
		_, ok := rec.deletion(first)
		return obs.Sync(ctx) == nil && ok
	})
}

// pg-advisory-xact's token outlives a crash of the server that granted it:
// a grant whose transaction is still open when pg0 is killed, then a grant
// after the restart, must have a greater token (before the token was taken
// in a statement of its own that commits, the open transaction's nextval
// died with the crash and the same token was granted again).
func TestXactTokenSurvivesACrash(t *testing.T) {
	pgserver.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	started, err := (&Options{IdleTimeout: 10 * time.Second}).Start(ctx, backend.Plan{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer started.Close()
	acquire := func(name string) (lock.Locker, lock.Held) {
		c, err := started.Workload.Connect(workload.Client{Name: name, Clock: clock.New(), Paused: func(context.Context) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		r, _, _ := pglockBuiltin(pglock.XactName)
		l, err := r.New(ctx, lock.Env{Conn: c.Env(), Clock: clock.New(), TTL: 1, Prefix: "t/", Name: name})
		if err != nil {
			t.Fatal(err)
		}
		h, err := l.Acquire(ctx, "L")
		if err != nil {
			t.Fatal(err)
		}
		return l, h
	}
	l1, h1 := acquire("c1")
	defer l1.Close()
	crasher := started.System.(system.Crasher)
	if err := crasher.HardStopMember(0); err != nil {
		t.Fatal(err)
	}
	if err := crasher.RestartMember(ctx, 0); err != nil {
		t.Fatal(err)
	}
	l2, h2 := acquire("c2")
	defer l2.Close()
	if h2.Token() <= h1.Token() {
		t.Errorf("the grant after the crash has token %d, the grant before it %d: a token was handed out again", h2.Token(), h1.Token())
	}
}
