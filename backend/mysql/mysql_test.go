package mysql

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/backend/mysql/mysqllock"
	"github.com/locktest/locktest/backend/mysql/mysqlserver"
	"github.com/locktest/locktest/clock"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/system"
	"github.com/locktest/locktest/workload"
)

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

// On a real MariaDB, through the backend's seam: c1 holds mysql-get-lock
// and releases it (the observer says: released), takes it again and is
// cut off; the server ends its silent session after wait_timeout (the
// observer says: expiry, from the server's log), and c2 is granted the
// lock with a higher token.
func TestGetLockThroughTheSeam(t *testing.T) {
	mysqlserver.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	started, err := (&Options{IdleTimeout: time.Second}).Start(ctx, backend.Plan{Dir: t.TempDir()})
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
	sync := func() {
		t.Helper()
		if err := obs.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	locker := func(name string) (workload.Conn, lock.Locker) {
		c, err := started.Workload.Connect(workload.Client{Name: name, Clock: clock.New(), Paused: func(context.Context) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		l, err := mysqllock.GetLock(true).New(ctx, lock.Env{Conn: c.Env(), Clock: clock.New(), TTL: 1, Prefix: keys.Prefix, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		return c, l
	}

	c1, l1 := locker("c1")
	h, err := l1.Acquire(ctx, "L")
	if err != nil {
		t.Fatal(err)
	}
	g := c1.Granted(l1, h, 1)
	sync()
	g.Releasing()
	err = h.Release(ctx)
	g.Released(err)
	if err != nil {
		t.Fatal(err)
	}
	sync()
	if d, ok := rec.deletion(h.Token()); !ok || d.Value.Params["by"] != histories.DeletedByRelease {
		t.Fatalf("the release of token %d: observed %+v (%v), want by=release", h.Token(), d.Value, ok)
	}

	h1, err := l1.Acquire(ctx, "L")
	if err != nil {
		t.Fatal(err)
	}
	c1.Granted(l1, h1, 1)
	sync()
	links, err := started.System.(system.Linker).Links("c1")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"upstream", "downstream"} {
		if _, err := links[0].AddToxic("cut-"+dir, "timeout", dir, 1, map[string]any{"timeout": 0}); err != nil {
			t.Fatal(err)
		}
	}
	c2, l2 := locker("c2")
	defer l2.Close()
	h2, err := l2.Acquire(ctx, "L")
	if err != nil {
		t.Fatal(err)
	}
	c2.Granted(l2, h2, 2)
	if h2.Token() <= h1.Token() {
		t.Errorf("c2's token %d is not above c1's %d", h2.Token(), h1.Token())
	}
	sync()
	d, ok := rec.deletion(h1.Token())
	if !ok || d.Value.Params["by"] != histories.DeletedByExpiry || d.Value.Targets[0] != "c1" {
		t.Fatalf("c1's cut-off session: observed %+v (%v), want the server ending c1's session", d.Value, ok)
	}
}
