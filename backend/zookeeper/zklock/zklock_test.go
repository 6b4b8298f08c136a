package zklock

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locktest/locktest/backend/zookeeper/zkserver"
	"github.com/locktest/locktest/internal/polltest"
	"github.com/locktest/locktest/lock"
)

// One ensemble for the package's tests: each start costs seconds of CPU.
var (
	shared     *zkserver.Ensemble
	sharedErr  error
	sharedOnce sync.Once
	sharedDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.Close()
	}
	if sharedDir != "" {
		os.RemoveAll(sharedDir)
	}
	os.Exit(code)
}

// ensemble is the package's ensemble of 3, started on first use.
func ensemble(t *testing.T) *zkserver.Ensemble {
	t.Helper()
	in := zkserver.ForTest(t)
	sharedOnce.Do(func() {
		sharedDir, sharedErr = os.MkdirTemp("", "zklock-test-")
		if sharedErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		shared, sharedErr = zkserver.Start(ctx, zkserver.Config{Servers: 3, Dir: sharedDir, LogDir: filepath.Join(sharedDir, "logs"), Install: in})
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

const (
	// timeout is the session timeout of the tests about a session's
	// expiry.
	timeout = 2 * time.Second
	// long is the session timeout of the others: a loaded machine's stalls
	// (the test process and the servers starved for a second and more) do
	// not end it. With 2 s, TestPausePastTimeout's waiter and
	// TestLostCreateReply's reconnecting session were lost at load 10-12.
	long = 20 * time.Second
)

// client is a Client of e through the links of client name.
func client(t *testing.T, e *zkserver.Ensemble, name string) *Client {
	t.Helper()
	eps, err := e.Endpoints(name)
	if err != nil {
		t.Fatal(err)
	}
	return &Client{Servers: eps}
}

// watched tells whether a session on a server of e watches path; a
// server that does not answer in time counts as not (yet) telling.
func watched(t *testing.T, e *zkserver.Ensemble, path string) bool {
	t.Helper()
	for _, addr := range e.ClientAddrs() {
		ok, err := zkserver.Watched(context.Background(), addr, path)
		if err != nil {
			t.Logf("asking %s for its watches: %v", addr, err) // a slow answer: asked again
		}
		if ok {
			return true
		}
	}
	return false
}

// direct is a session straight to the servers, to look at the tree.
func direct(t *testing.T, e *zkserver.Ensemble) *Session {
	t.Helper()
	s, err := (&Client{Servers: e.ClientAddrs()}).Connect(context.Background(), long)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// locker is a locker of r on c whose sessions ask for the session timeout
// ttl.
func locker(t *testing.T, r lock.Recipe, c *Client, name string, ttl time.Duration) *Mutex {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := r.New(ctx, lock.Env{Conn: c, Prefix: "/" + strings.ReplaceAll(t.Name(), "/", "-") + "/", Name: name, TTL: int(ttl / time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.(*Mutex)
}

// children lists dir as the leader has it: s's server may lag behind the
// one another session wrote through (a delete it acknowledged can still
// be listed there), so it syncs first. A connection lost meanwhile (at
// load ~45 the servers, starved, dropped one) is waited out.
func children(t *testing.T, s *Session, dir string) []string {
	t.Helper()
	var kids []string
	var err error
	polltest.Until(t, 30*time.Second, "a listing of "+dir, func() bool {
		if _, err = s.Conn.Sync(dir); err == nil {
			kids, _, err = s.Conn.Children(dir)
		}
		return !transient(err)
	})
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	return kids
}

// Contenders of the standard lock and its herd variant never overlap,
// each grant's token (its node's czxid) exceeds every earlier grant's, and
// each grant was decided on a state that had its node (token <= decision
// zxid).
func TestExclusion(t *testing.T) {
	e := ensemble(t)
	for _, name := range []string{LockName, HerdName} {
		t.Run(name, func(t *testing.T) {
			r := Recipe(name, Options{Herd: name == HerdName})
			var (
				inside atomic.Int32
				mu     sync.Mutex
				last   int64
				grants int
				wg     sync.WaitGroup
			)
			for i := range 3 {
				l := locker(t, r, client(t, e, "c"+string(rune('0'+i))), "c", long)
				wg.Go(func() {
					for range 15 {
						ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
						h, err := l.Acquire(ctx, "l")
						cancel()
						if err != nil {
							t.Error(err)
							return
						}
						if inside.Add(1) != 1 {
							t.Error("two holders at once")
						}
						mu.Lock()
						if h.Token() <= last {
							t.Errorf("token %#x after %#x", h.Token(), last)
						}
						if d := h.(*Held).Revision(); d < h.Token() {
							t.Errorf("decided at %#x, before its node's creation %#x", d, h.Token())
						}
						last = h.Token()
						grants++
						mu.Unlock()
						time.Sleep(time.Millisecond)
						inside.Add(-1)
						if err := h.Release(context.Background()); err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
			if grants != 45 {
				t.Errorf("%d grants, want 45", grants)
			}
		})
	}
}

// A holder paused past its session timeout loses its node on the servers
// (expiry) while paused, and learns it once it resumes; the next waiter is
// granted meanwhile.
func TestPausePastTimeout(t *testing.T) {
	e := ensemble(t)
	var pausedUntil atomic.Int64
	c := client(t, e, "p0")
	c.Paused = func(ctx context.Context) error {
		for time.Now().UnixNano() < pausedUntil.Load() {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
		return ctx.Err()
	}
	r := Recipe(LockName, Options{})
	a := locker(t, r, c, "p0", timeout)
	b := locker(t, r, client(t, e, "p1"), "p1", long) // the waiter's session is not what expires
	ctx := context.Background()
	h, err := a.Acquire(ctx, "l")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx, "l")
		got <- err
	}()
	// The holder stays paused until the checks below are done: a pause
	// of a fixed length (it was 3 timeouts) could end, on a loaded
	// machine, before the waiter's grant had been checked.
	look := direct(t, e)
	pausedUntil.Store(math.MaxInt64)
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter was not granted while the holder was paused past its session")
	}
	if _, err := look.Conn.Sync(h.(*Held).Key()); err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	if ok, _, err := look.Conn.Exists(h.(*Held).Key()); err != nil || ok {
		t.Fatalf("the paused holder's node: exists %v (%v)", ok, err)
	}
	select {
	case <-h.(*Held).Done():
		t.Fatal("the paused holder learned of its loss while paused")
	default:
	}
	pausedUntil.Store(0)
	polltest.Until(t, 10*time.Second, "the holder to learn its session is lost", func() bool {
		select {
		case <-h.(*Held).Done():
			return true
		default:
			return false
		}
	})
}

// An orphaned session (a crashed client) keeps its node until the servers
// expire it; a closed one loses it at once.
func TestOrphanAndClose(t *testing.T) {
	e := ensemble(t)
	r := Recipe(LockName, Options{})
	look := direct(t, e)
	for _, orphan := range []bool{true, false} {
		// An orphan's session expires after its timeout; a closed one's
		// node goes at once, long before a session of 20 s would expire.
		ttl := long
		if orphan {
			ttl = timeout
		}
		l := locker(t, r, client(t, e, "o0"), "o0", ttl)
		h, err := l.Acquire(context.Background(), "l")
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		if orphan {
			l.Orphan()
		} else {
			l.Close()
		}
		node := h.(*Held).Key()
		polltest.Until(t, 30*time.Second, "the node to go", func() bool {
			ok, _, err := look.Conn.Exists(node)
			return err == nil && !ok
		})
		took := time.Since(began)
		if orphan && took < timeout/2 {
			t.Errorf("an orphaned session's node went after %v, before its timeout %v", took, timeout)
		}
		if !orphan && took >= long/2 {
			t.Errorf("a closed session's node went only after %v, as if left to expire", took)
		}
	}
}

// zk-no-recheck takes the lock when the waiter ahead of it gives up,
// while the holder still holds it; zk-lock lists again and waits.
func TestNoRecheck(t *testing.T) {
	e := ensemble(t)
	for _, name := range []string{NoRecheckName, LockName} {
		t.Run(name, func(t *testing.T) {
			r := Recipe(name, Options{NoRecheck: name == NoRecheckName})
			holder := locker(t, r, client(t, e, "n0"), "n0", long)
			quitter := locker(t, r, client(t, e, "n1"), "n1", long)
			waiter := locker(t, r, client(t, e, "n2"), "n2", long)
			look := direct(t, e)
			ctx := context.Background()
			if _, err := holder.Acquire(ctx, "l"); err != nil {
				t.Fatal(err)
			}
			dir := "/" + strings.ReplaceAll(t.Name(), "/", "-") + "/l"
			qctx, giveUp := context.WithCancel(ctx)
			qdone := make(chan error, 1)
			go func() {
				_, err := quitter.Acquire(qctx, "l")
				qdone <- err
			}()
			polltest.Until(t, 10*time.Second, "the quitter to queue", func() bool { return len(children(t, look, dir)) == 2 })
			got := make(chan error, 1)
			// zk-lock must still wait when its 3 s end; zk-no-recheck is
			// granted once the quitter's node goes, within a deadline (the
			// time the waiter takes to queue counts against it).
			wait := 3 * time.Second
			if name == NoRecheckName {
				wait = 30 * time.Second
			}
			wctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			go func() {
				_, err := waiter.Acquire(wctx, "l")
				got <- err
			}()
			polltest.Until(t, 10*time.Second, "the waiter to queue", func() bool { return len(children(t, look, dir)) == 3 })
			// The quitter gives up once the waiter watches its node: gone
			// before that, the waiter would list the holder as the node
			// before its own and watch it instead (a loaded host).
			queue := children(t, look, dir)
			slices.SortFunc(queue, func(a, b string) int { return int(seq(a) - seq(b)) })
			quitterNode := dir + "/" + queue[1]
			polltest.Until(t, 10*time.Second, "the waiter to watch the quitter's node", func() bool { return watched(t, e, quitterNode) })
			giveUp()
			if err := <-qdone; !errors.Is(err, context.Canceled) {
				t.Fatalf("the quitter's Acquire: %v", err)
			}
			err := <-got
			switch {
			case name == NoRecheckName && err != nil:
				t.Fatalf("zk-no-recheck was not granted behind the holder: %v", err)
			case name == LockName && !errors.Is(err, context.DeadlineExceeded):
				t.Fatalf("zk-lock, behind a holder: %v", err)
			}
		})
	}
}

// A create whose reply is lost: the server applied it, the connection
// died before the reply came. zk-unprotected creates again and waits
// behind its own first node, a ghost its live session owns; zk-lock finds
// its node by its protected name and is granted the lock.
func TestLostCreateReply(t *testing.T) {
	e := ensemble(t)
	look := direct(t, e)
	for _, name := range []string{UnprotectedName, LockName} {
		t.Run(name, func(t *testing.T) {
			cname := "g-" + name
			c := client(t, e, cname)
			l := locker(t, Recipe(name, Options{Unprotected: name == UnprotectedName}), c, cname, long)
			links, err := e.Links(cname)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e.ClearToxics() })
			// The lock's node is there: only the child's create is
			// under way when the reply is lost.
			dir := "/" + strings.ReplaceAll(t.Name(), "/", "-") + "/l"
			if err := l.makeDir(context.Background(), dir); err != nil {
				t.Fatal(err)
			}
			// The link the session is on holds every reply back.
			i := 0
			for j, addr := range c.Servers {
				if addr == l.Conn.Server() {
					i = j
				}
			}
			if _, err := links[i].AddToxic("hold", "timeout", "downstream", 1, map[string]any{"timeout": 0}); err != nil {
				t.Fatal(err)
			}
			// zk-unprotected waits behind its ghost until ctx ends: 4 s;
			// zk-lock is granted once it reconnects, within a deadline.
			wait := 4 * time.Second
			if name == LockName {
				wait = 30 * time.Second
			}
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			got := make(chan error, 1)
			go func() {
				_, err := l.Acquire(ctx, "l")
				got <- err
			}()
			polltest.Until(t, 10*time.Second, "the create to be applied", func() bool { return len(children(t, look, dir)) == 1 })
			if err := links[i].Disable(); err != nil {
				t.Fatal(err)
			}
			err = <-got
			kids := children(t, look, dir)
			switch name {
			case UnprotectedName:
				if !errors.Is(err, context.DeadlineExceeded) || len(kids) != 1 {
					t.Fatalf("zk-unprotected: Acquire %v, nodes %v; want a timeout and the ghost left", err, kids)
				}
				_, st, err := look.Conn.Get(dir + "/" + kids[0])
				if err != nil || st.EphemeralOwner != l.SessionID() {
					t.Fatalf("the ghost %s is owned by %#x (%v), not the live session %#x", kids[0], st.EphemeralOwner, err, l.SessionID())
				}
			default:
				if err != nil {
					t.Fatalf("zk-lock: %v", err)
				}
			}
		})
	}
}
