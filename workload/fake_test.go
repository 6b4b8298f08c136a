package workload_test

import (
	"context"
	"strconv"
	"sync"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/workload"
)

// A fake of the seam to a lock service (backend.go), in memory: one
// lock table that every client's connection shares, a grant's token
// counting up per lock, no leases, nothing on the network but the
// resource's own links. It tests the workload's own logic (what a client
// records, its controls, the final reads) without a server; what a real
// service does under faults is the backends' tests' to show.

// table is the fake service's state: each lock's holder and its last
// token.
type table struct {
	mu      sync.Mutex
	changed chan struct{} // closed at each release
	holder  map[string]*fakeLocker
	tokens  map[string]int64
}

func newTable() *table {
	return &table{changed: make(chan struct{}), holder: map[string]*fakeLocker{}, tokens: map[string]int64{}}
}

// fakeBackend is a workload.Backend on a table.
type fakeBackend struct{ t *table }

func (b fakeBackend) Name() string { return "fake" }

// ResourceProxy puts no proxy in front of the resource: no fault here
// acts on a client's links.
func (b fakeBackend) ResourceProxy(_, upstream string) (string, error) { return upstream, nil }

func (b fakeBackend) Connect(workload.Client) (workload.Conn, error) { return fakeConn(b), nil }

func (b fakeBackend) Observe(context.Context, workload.Keys, workload.Recorder) (workload.Observer, error) {
	return fakeObserver{}, nil
}

type fakeConn struct{ t *table }

func (c fakeConn) Env() any                                     { return c.t }
func (c fakeConn) Endpoints() []string                          { return nil }
func (c fakeConn) Locker(lock.Locker, histories.Process) string { return "" }
func (c fakeConn) CloseLocker(l lock.Locker) error              { return l.Close() }
func (c fakeConn) Acquiring()                                   {}
func (c fakeConn) Close() error                                 { return nil }
func (c fakeConn) Granted(_ lock.Locker, held lock.Held, _ histories.Process) workload.Grant {
	return fakeGrant{workload.Claim{Key: held.(*fakeHeld).key}}
}

type fakeGrant struct{ claim workload.Claim }

func (g fakeGrant) Claim() workload.Claim { return g.claim }
func (g fakeGrant) Releasing()            {}
func (g fakeGrant) Released(error)        {}

// fakeObserver sees no deletion: the fake has no keys that expire.
type fakeObserver struct{}

func (fakeObserver) Sync(context.Context) error { return nil }
func (fakeObserver) RecordObserved()            {}
func (fakeObserver) Err() error                 { return nil }
func (fakeObserver) Close()                     {}

// fakeRecipe is a correct lock on the table: one holder per lock, each
// grant's token above the last.
type fakeRecipe struct{}

func (fakeRecipe) Name() string { return "fake-mutex" }

func (fakeRecipe) New(_ context.Context, env lock.Env) (lock.Locker, error) {
	return &fakeLocker{t: env.Conn.(*table), name: env.Name}, nil
}

type fakeLocker struct {
	t    *table
	name string
}

func (l *fakeLocker) Acquire(ctx context.Context, name string) (lock.Held, error) {
	for {
		l.t.mu.Lock()
		if l.t.holder[name] == nil {
			l.t.holder[name] = l
			l.t.tokens[name]++
			h := &fakeHeld{l: l, lock: name, token: l.t.tokens[name], key: name + "/" + strconv.FormatInt(l.t.tokens[name], 10)}
			l.t.mu.Unlock()
			return h, nil
		}
		changed := l.t.changed
		l.t.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close lets go of every lock l holds, as a session's end would.
func (l *fakeLocker) Close() error {
	l.t.mu.Lock()
	defer l.t.mu.Unlock()
	for name, h := range l.t.holder {
		if h == l {
			l.t.release(name)
		}
	}
	return nil
}

// Orphan is a crash's: the fake service expires what the orphaned locker
// kept alive at once, freeing its locks, as a server would at the end of
// its TTL. The fake keeps no session (no Done), as a watchdog lock does
// (redlock): a crash must orphan it all the same.
func (l *fakeLocker) Orphan() { l.Close() }

// release frees lock name; the caller holds t.mu.
func (t *table) release(name string) {
	delete(t.holder, name)
	close(t.changed)
	t.changed = make(chan struct{})
}

type fakeHeld struct {
	l         *fakeLocker
	lock, key string
	token     int64
}

func (h *fakeHeld) Token() int64 { return h.token }
func (h *fakeHeld) Key() string  { return h.key }

func (h *fakeHeld) Release(context.Context) error {
	h.l.t.mu.Lock()
	defer h.l.t.mu.Unlock()
	if h.l.t.holder[h.lock] == h.l && h.l.t.tokens[h.lock] == h.token {
		h.l.t.release(h.lock)
	}
	return nil
}
