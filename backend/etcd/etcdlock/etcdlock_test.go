package etcdlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locktest/locktest/backend/etcd/cluster"
	"github.com/locktest/locktest/backend/etcd/etcdlock"
	"github.com/locktest/locktest/clock"
	"github.com/locktest/locktest/internal/polltest"
	"github.com/locktest/locktest/lock"
)

// Each recipe, driven directly: two clients take turns, tokens grow, and
// the second waits while the first holds.
func TestRecipesDirect(t *testing.T) {
	ctx, c := startCluster(t)
	for _, b := range etcdlock.Builtins { // Redis's need servers of their own: cmd/locktest's Redis tests
		name := b.Name
		t.Run(name, func(t *testing.T) {
			lockers := twoLockers(ctx, t, c, name, "/direct/"+name+"/")
			h, err := lockers[0].Acquire(ctx, "x")
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan lock.Held, 1)
			go func() {
				h2, err := lockers[1].Acquire(ctx, "x")
				if err != nil {
					t.Error(err)
				}
				got <- h2
			}()
			select {
			case <-got:
				t.Fatal("the second client acquired while the first held")
			case <-time.After(300 * time.Millisecond):
			}
			if err := h.Release(ctx); err != nil {
				t.Fatal(err)
			}
			var h2 lock.Held
			select {
			case h2 = <-got:
			case <-time.After(15 * time.Second):
				t.Fatal("the second client did not acquire after the release")
			}
			if h2 == nil {
				return
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

// A waiter whose lease expires while it queues (etcd#11456): the fixed
// mutex and election-checked refuse the grant once the queue ahead empties;
// mutex-3.4 and etcd's own Election grant a lock whose key is already gone,
// decided on a read at or after that key's deletion.
func TestWaiterWhoseLeaseEnded(t *testing.T) {
	ctx, c := startCluster(t)
	admin, err := c.Client("admin")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, tc := range []struct {
		recipe  string
		granted bool
	}{
		{etcdlock.MutexName, false}, {etcdlock.Mutex34Name, true}, {etcdlock.ElectionName, true}, {etcdlock.ElectionCheckedName, false},
	} {
		t.Run(tc.recipe, func(t *testing.T) {
			prefix := "/waiter/" + tc.recipe + "/"
			lockers := twoLockers(ctx, t, c, tc.recipe, prefix)
			h, err := lockers[0].Acquire(ctx, "x")
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				h   lock.Held
				err error
			}
			got := make(chan result, 1)
			go func() {
				h2, err := lockers[1].Acquire(ctx, "x")
				got <- result{h2, err}
			}()
			polltest.Until(t, 5*time.Second, "the waiter's key", func() bool {
				resp, err := admin.Get(ctx, prefix+"x", clientv3.WithPrefix(), clientv3.WithCountOnly())
				return err == nil && resp.Count == 2
			})
			rev, err := admin.Revoke(ctx, lockers[1].(etcdlock.LeaseHolder).LeaseID())
			if err != nil {
				t.Fatal(err)
			}
			deletedAt := rev.Header.Revision
			if err := h.Release(ctx); err != nil {
				t.Fatal(err)
			}
			var res result
			select {
			case res = <-got:
			case <-time.After(10 * time.Second):
				t.Fatal("the waiter's Acquire did not return after the holder released")
			}
			if !tc.granted {
				if !errors.Is(res.err, lock.ErrNotAcquired) {
					t.Fatalf("Acquire = %v, %v; want an error wrapping ErrNotAcquired", res.h, res.err)
				}
				return
			}
			if res.err != nil {
				t.Fatalf("Acquire: %v; want the (wrong) grant", res.err)
			}
			k := res.h.(etcdlock.Keyed).Key()
			if resp, err := admin.Get(ctx, k); err != nil || len(resp.Kvs) != 0 {
				t.Fatalf("the granted key %s: %v, %v; want it gone", k, resp, err)
			}
			if d, ok := res.h.(lock.Decided); ok && d.Revision() < deletedAt {
				t.Errorf("grant decided at revision %d, before the key's deletion at %d", d.Revision(), deletedAt)
			}
		})
	}
}

// startCluster starts a cluster for one test, with a minute for the test.
func startCluster(t *testing.T) (context.Context, *cluster.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	c, err := cluster.Start(ctx, cluster.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return ctx, c
}

// twoLockers makes lockers of the built-in recipe for clients a and b, each
// over links of its own, with keys under prefix. Their sessions' TTL is 20 s:
// these tests are about turns, tokens and revoked leases, and with the 2 s
// they had a loaded machine's stall once let a waiter's lease expire
// (TestRecipesDirect/same-key: "the session's lease is gone").
func twoLockers(ctx context.Context, t *testing.T, c *cluster.Cluster, recipe, prefix string) []lock.Locker {
	t.Helper()
	var r lock.Recipe
	for _, b := range etcdlock.Builtins {
		if b.Name == recipe {
			r = b.New()
		}
	}
	if r == nil {
		t.Fatalf("no recipe %s", recipe)
	}
	var lockers []lock.Locker
	for _, cn := range []string{"a", "b"} {
		cli, err := c.Client(strings.ReplaceAll(strings.Trim(prefix, "/"), "/", ".") + "." + cn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		l, err := r.New(ctx, lock.Env{Conn: cli, Clock: clock.New(), TTL: 20, Prefix: prefix, Name: cn})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		lockers = append(lockers, l)
	}
	return lockers
}

// etcd#22123 as its report reproduces it: a Resign whose request never
// reaches etcd (its context is cancelled) fails; election-retry's Election
// has forgotten its leadership, so the retry returns nil and the key
// stays; election-retry-kept's retry deletes it.
func TestResignRetried(t *testing.T) {
	ctx, c := startCluster(t)
	for _, tc := range []struct {
		recipe string
		stays  bool
	}{{etcdlock.ElectionRetryName, true}, {etcdlock.ElectionRetryKeptName, false}} {
		t.Run(tc.recipe, func(t *testing.T) {
			l := twoLockers(ctx, t, c, tc.recipe, "/resign/"+tc.recipe+"/")[0]
			h, err := l.Acquire(ctx, "lock")
			if err != nil {
				t.Fatal(err)
			}
			key := h.(lock.Keyed).Key()
			cancelled, cancel := context.WithCancel(ctx)
			cancel()
			if err := h.Release(cancelled); err == nil {
				t.Fatal("a Resign with a cancelled context succeeded")
			}
			if err := h.Release(ctx); err != nil {
				t.Fatalf("the retried release: %v", err)
			}
			cli, err := c.Client("resign.check")
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			resp, err := cli.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if stays := len(resp.Kvs) == 1; stays != tc.stays {
				t.Errorf("after the retried release the leader key %s is there: %v, want %v", key, stays, tc.stays)
			}
		})
	}
}
