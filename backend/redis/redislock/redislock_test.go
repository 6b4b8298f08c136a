package redislock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktest/locktest/backend/redis/redislock"
	"github.com/locktest/locktest/backend/redis/redisserver"
	"github.com/locktest/locktest/clock"
	"github.com/locktest/locktest/lock"
)

// deploy starts a deployment for one test, with a minute for the test.
func deploy(t *testing.T, topo redisserver.Topology) (context.Context, *redisserver.Deployment) {
	t.Helper()
	bin := redisserver.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	d, err := redisserver.Start(ctx, redisserver.Config{Binary: bin, Topology: topo, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return ctx, d
}

// dial connects client over its own links, following Sentinel when the
// deployment has it.
func dial(t *testing.T, d *redisserver.Deployment, client string) *redislock.Conn {
	t.Helper()
	eps, err := d.Endpoints(client)
	if err != nil {
		t.Fatal(err)
	}
	cfg := redislock.DialConfig{Servers: eps}
	if ss := d.Sentinels(); len(ss) > 0 {
		for _, s := range ss {
			cfg.Sentinels = append(cfg.Sentinels, s.Addr)
		}
		cfg.MasterName = redisserver.MasterName
		if cfg.Dialer, err = d.Dialer(client); err != nil {
			t.Fatal(err)
		}
	}
	c, err := redislock.Dial(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// lockers makes a locker of r for each client, with keys under prefix and
// a TTL of ttl seconds.
func lockers(ctx context.Context, t *testing.T, d *redisserver.Deployment, r lock.Recipe, prefix string, ttl int, clients ...string) []lock.Locker {
	t.Helper()
	var ls []lock.Locker
	for _, c := range clients {
		l, err := r.New(ctx, lock.Env{Conn: dial(t, d, c), Clock: clock.New(), TTL: ttl, Prefix: prefix, Name: c})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		ls = append(ls, l)
	}
	return ls
}

// topology is where each built-in recipe runs.
func topology(recipe string) redisserver.Topology {
	if recipe == redislock.RedlockName {
		return redisserver.Independent(5)
	}
	return redisserver.Single
}

// tryAcquire acquires within d and returns the grant, nil if there was
// none: a definite "not acquired", or an attempt that d's end cut short
// mid-command (its outcome unknown, as the recipe rightly says: on a
// loaded machine a command is more often in flight when the deadline
// comes). Any other error fails the test.
func tryAcquire(ctx context.Context, t *testing.T, l lock.Locker, name string, d time.Duration) lock.Held {
	t.Helper()
	actx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	h, err := l.Acquire(actx, name)
	// The deadline's time, not actx.Err(): the command's i/o timeout (its
	// connection's deadline is actx's) can come before actx's own timer
	// has marked it done.
	deadline, _ := actx.Deadline()
	if err != nil && !errors.Is(err, lock.ErrNotAcquired) && time.Now().Before(deadline) {
		t.Fatalf("Acquire: %v, want a grant or ErrNotAcquired", err)
	}
	return h
}

// Each recipe, two clients: the second waits while the first holds, gets
// the lock once it is released, with a higher token.
func TestMutualExclusion(t *testing.T) {
	t.Parallel()
	for _, b := range redislock.Builtins {
		t.Run(b.Name, func(t *testing.T) {
			ctx, d := deploy(t, topology(b.Name))
			ls := lockers(ctx, t, d, b.New(), "/mutex/", 2, "a", "b")
			h, err := ls[0].Acquire(ctx, "x")
			if err != nil {
				t.Fatal(err)
			}
			if h2 := tryAcquire(ctx, t, ls[1], "x", 300*time.Millisecond); h2 != nil {
				t.Fatal("b acquired while a held")
			}
			if err := h.Release(ctx); err != nil {
				t.Fatal(err)
			}
			h2, err := ls[1].Acquire(ctx, "x")
			if err != nil {
				t.Fatal(err)
			}
			if h2.Token() <= h.Token() {
				t.Errorf("token %d after %d", h2.Token(), h.Token())
			}
			if err := h2.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// redis-setnx's tokens grow with every grant, whoever takes it.
func TestSetNXTokensGrow(t *testing.T) {
	t.Parallel()
	ctx, d := deploy(t, redisserver.Single)
	ls := lockers(ctx, t, d, redislock.SetNX(0), "/tokens/", 2, "a", "b", "c")
	var last int64
	for i := range 9 {
		h, err := ls[i%3].Acquire(ctx, "x")
		if err != nil {
			t.Fatal(err)
		}
		if h.Token() <= last {
			t.Fatalf("grant %d: token %d after %d", i, h.Token(), last)
		}
		last = h.Token()
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A holder whose key expired under it releases late, after another client
// took the lock: redis-setnx's compare-and-delete leaves the new holder's
// key; redis-del deletes it. The old holder's watchdog learns of the loss.
func TestLateRelease(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		recipe  lock.Recipe
		deletes bool
	}{
		{redislock.SetNX(0), false}, {redislock.Del(0), true},
	} {
		t.Run(tc.recipe.Name(), func(t *testing.T) {
			ctx, d := deploy(t, redisserver.Single)
			ls := lockers(ctx, t, d, tc.recipe, "/late/", 5, "a", "b")
			h, err := ls[0].Acquire(ctx, "x")
			if err != nil {
				t.Fatal(err)
			}
			// Emulate a's TTL running out (a clock jump on the server).
			if keys, err := d.ExpireEarly(ctx, 0, "/late/*"); err != nil || len(keys) != 1 {
				t.Fatalf("ExpireEarly: %v, %v", keys, err)
			}
			h2, err := ls[1].Acquire(ctx, "x")
			if err != nil {
				t.Fatal(err)
			}
			if w, ok := h.(lock.Watched); ok {
				select {
				case <-w.Done():
				case <-time.After(5 * time.Second):
					t.Fatal("a's watchdog did not learn that its key was gone")
				}
			}
			if err := h.Release(ctx); err != nil {
				t.Fatal(err)
			}
			v, err := d.Servers()[0].Client().Get(ctx, "/late/x").Result()
			switch {
			case tc.deletes && err != redis.Nil:
				t.Fatalf("after a's late release the key is %q (%v), want it deleted (the bug)", v, err)
			case !tc.deletes && (err != nil || !strings.HasPrefix(v, "b:")):
				t.Fatalf("after a's late release the key is %q (%v), want b's", v, err)
			}
			h2.Release(ctx)
		})
	}
}

// The watchdog keeps a lock held for two TTLs; redis-del, which has none,
// loses it after one. The TTL is 4 s: a watchdog keeps a lock only while
// its renewals (every TTL/3) get through within the TTL (for Redlock, each
// round trip within a twentieth of it, as redsync bounds them). With 1 s a
// loaded machine's stalls let Redlock's lapse; with 2 s, once, redis-setnx's
// (load ~19: the servers, processes of their own, expired a's key while
// the test process stood still, and b took it). That is the lease race
// itself, which is not what this test is about.
func TestWatchdogKeepsLock(t *testing.T) {
	t.Parallel()
	const ttl = 4
	for _, tc := range []struct {
		recipe lock.Recipe
		topo   redisserver.Topology
		keeps  bool
	}{
		{redislock.SetNX(0), redisserver.Single, true},
		{redislock.Redlock(0), redisserver.Independent(5), true},
		{redislock.Del(0), redisserver.Single, false},
	} {
		t.Run(tc.recipe.Name(), func(t *testing.T) {
			t.Parallel() // each waits two TTLs on servers of its own
			ctx, d := deploy(t, tc.topo)
			ls := lockers(ctx, t, d, tc.recipe, "/watchdog/", ttl, "a", "b")
			h, err := ls[0].Acquire(ctx, "x")
			if err != nil {
				t.Fatal(err)
			}
			// b tries for two TTLs.
			h2 := tryAcquire(ctx, t, ls[1], "x", 2*ttl*time.Second)
			if tc.keeps {
				if h2 != nil {
					t.Fatal("b acquired while a's watchdog kept the lock")
				}
				// The servers' truth, whatever b's last attempt did: the
				// key is still a's.
				v := h.(redislock.Valued)
				held := 0
				for i, s := range dial(t, d, "check").Servers {
					got, err := s.Get(ctx, v.Key()).Result()
					if err != nil && err != redis.Nil {
						t.Fatalf("server %d: %v", i, err)
					}
					if got != "" && got != v.Value() {
						t.Fatalf("server %d holds %s = %q; a set %q", i, v.Key(), got, v.Value())
					}
					if got != "" {
						held++
					}
				}
				if held == 0 {
					t.Fatal("no server holds a's key")
				}
				select {
				case <-h.(lock.Watched).Done():
					t.Fatal("a's watchdog gave up a lock it kept")
				default:
				}
			} else if h2 == nil {
				t.Fatal("b did not acquire a lock that nothing renewed")
			}
		})
	}
}

// A pause of the holder (its process stopped: lock.Env.Paused blocks)
// stops its watchdog too, so its key expires and another client takes the
// lock while it is paused; resumed, its next renewal finds the key not its
// own and it learns it lost the lock. Before, the watchdog went on renewing
// through the pause and no pause fault could harm a watchdog lock.
func TestPausedHolderLosesLock(t *testing.T) {
	t.Parallel()
	for _, r := range []lock.Recipe{redislock.SetNX(0), redislock.Redlock(0)} {
		t.Run(r.Name(), func(t *testing.T) {
			t.Parallel()
			ctx, d := deploy(t, topology(r.Name()))
			var mu sync.Mutex
			var resume chan struct{} // non-nil while a is paused
			paused := func(ctx context.Context) error {
				mu.Lock()
				ch := resume
				mu.Unlock()
				if ch == nil {
					return ctx.Err()
				}
				select {
				case <-ch:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			a, err := r.New(ctx, lock.Env{Conn: dial(t, d, "a"), Clock: clock.New(), TTL: 1, Prefix: "/client-paused/", Name: "a", Paused: paused})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { a.Close() })
			b := lockers(ctx, t, d, r, "/client-paused/", 1, "b")[0]
			h, err := a.Acquire(ctx, "x")
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			resume = make(chan struct{})
			mu.Unlock()
			h2 := tryAcquire(ctx, t, b, "x", 10*time.Second)
			if h2 == nil {
				t.Fatal("b was not granted the lock of a paused holder within 10 s: its watchdog renewed through the pause")
			}
			mu.Lock()
			close(resume)
			resume = nil
			mu.Unlock()
			select {
			case <-h.(lock.Watched).Done():
			case <-time.After(10 * time.Second):
				t.Fatal("a, resumed, did not learn it lost the lock")
			}
		})
	}
}

// A holder whose server is paused past the TTL loses the lock: its
// watchdog cannot renew, and it learns so once a TTL of its clock has
// passed; resumed, the server has expired the key, and another client
// takes it.
func TestPausedServerLosesLock(t *testing.T) {
	t.Parallel()
	ctx, d := deploy(t, redisserver.Single)
	ls := lockers(ctx, t, d, redislock.SetNX(0), "/paused/", 1, "a", "b")
	h, err := ls[0].Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Pause(0); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	select {
	case <-h.(lock.Watched).Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a's watchdog did not give up the lock")
	}
	// The last renewal began before the pause, so a TTL (1 s) after the
	// pause at the latest, give or take scheduling.
	if since := time.Since(paused); since > 2*time.Second {
		t.Errorf("Done closed %v after the pause, want within a TTL (1 s)", since)
	}
	if err := d.Resume(0); err != nil {
		t.Fatal(err)
	}
	h2, err := ls[1].Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if h2.Token() <= h.Token() {
		t.Errorf("token %d after %d", h2.Token(), h.Token())
	}
}

// A holder cut off from the servers (every one of its links disabled)
// learns within a TTL of its clock that it lost the lock, which another
// client then takes.
func TestIsolatedHolderLosesLock(t *testing.T) {
	t.Parallel()
	ctx, d := deploy(t, redisserver.Single)
	ls := lockers(ctx, t, d, redislock.SetNX(0), "/isolated/", 1, "a", "b")
	h, err := ls[0].Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	links, err := d.Links("a")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if err := l.Disable(); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-h.(lock.Watched).Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the isolated holder's watchdog did not give up the lock")
	}
	if _, err := ls[1].Acquire(ctx, "x"); err != nil {
		t.Fatal(err)
	}
}

// The watchdog runs on the client's clock: a holder whose clock runs at a
// fifth of the speed renews too late, so its key expires and another
// client takes the lock while the holder still believes it holds it, until
// its late renewal finds the key gone.
func TestSlowClockLosesLock(t *testing.T) {
	t.Parallel()
	ctx, d := deploy(t, redisserver.Single)
	slow := clock.New()
	slow.SetRate(0.2)
	r := redislock.SetNX(0)
	var ls []lock.Locker
	for _, c := range []struct {
		name string
		clk  *clock.Clock
	}{{"a", slow}, {"b", clock.New()}} {
		l, err := r.New(ctx, lock.Env{Conn: dial(t, d, c.name), Clock: c.clk, TTL: 1, Prefix: "/slow/", Name: c.name})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		ls = append(ls, l)
	}
	h, err := ls[0].Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ls[1].Acquire(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.(lock.Watched).Done():
		t.Fatal("the slow holder learned of the loss before the other took the lock")
	default:
	}
	select {
	case <-h.(lock.Watched).Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the slow holder's late renewal did not find the key gone")
	}
}

// Redlock grants with a majority of its masters up, within its TTL with
// one paused, and not without a majority.
func TestRedlockQuorum(t *testing.T) {
	t.Parallel()
	ctx, d := deploy(t, redisserver.Independent(5))
	ls := lockers(ctx, t, d, redislock.Redlock(0), "/quorum/", 2, "a")
	if err := d.Pause(4); err != nil {
		t.Fatal(err)
	}
	// Redlock counts a grant only while its TTL, less the time its round
	// trips took, is left: a paused master that held them up would leave
	// none, so the grant itself says it was prompt (the bound only ends a
	// lock that never grants).
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	h, err := ls[0].Acquire(actx, "x")
	if err != nil {
		t.Fatalf("Acquire with 4 of 5 masters: %v", err)
	}
	if err := d.Resume(4); err != nil {
		t.Fatal(err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1} {
		if err := d.Crash(i); err != nil {
			t.Fatal(err)
		}
	}
	h, err = ls[0].Acquire(ctx, "x")
	if err != nil {
		t.Fatalf("Acquire with 3 of 5 masters: %v", err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Crash(2); err != nil {
		t.Fatal(err)
	}
	actx, cancel = context.WithTimeout(ctx, time.Second)
	defer cancel()
	if h, err := ls[0].Acquire(actx, "x"); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("Acquire with 2 of 5 masters = %v, %v; want ErrNotAcquired", h, err)
	}
}

// A failover to a replica that missed the latest writes grants the lock a
// second time while its first holder still holds it, with a token no
// higher: the fencing counter went back with the data.
func TestSetNXFailoverGrantsTwice(t *testing.T) {
	t.Parallel()
	ctx, d := deploy(t, redisserver.Replicated)
	ls := lockers(ctx, t, d, redislock.SetNX(0), "/failover/", 30, "a", "b")
	if err := d.CutReplication(); err != nil {
		t.Fatal(err)
	}
	h, err := ls[0].Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Failover(ctx); err != nil {
		t.Fatal(err)
	}
	// b's first attempts may meet the old master's link.
	var h2 lock.Held
	deadline := time.Now().Add(10 * time.Second)
	for h2 == nil && time.Now().Before(deadline) {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		h2, _ = ls[1].Acquire(actx, "x")
		cancel()
	}
	if h2 == nil {
		t.Fatal("b did not acquire on the new master")
	}
	select {
	case <-h.(lock.Watched).Done():
		t.Fatal("a learned of the loss already; want two holders at once")
	default:
	}
	if h2.Token() > h.Token() {
		t.Errorf("b's token %d is above a's %d; want the counter gone back", h2.Token(), h.Token())
	}
}

func TestRecipeFuncRefusesOtherConns(t *testing.T) {
	t.Parallel()
	r := redislock.SetNX(0)
	if _, err := r.New(context.Background(), lock.Env{Conn: "not redis", Clock: clock.New()}); err == nil || !strings.Contains(err.Error(), "*redislock.Conn") {
		t.Fatalf("New with a string for a Conn: %v", err)
	}
}
