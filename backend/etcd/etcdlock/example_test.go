package etcdlock_test

import (
	"context"
	"fmt"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/locktest/locktest/backend/etcd/etcdlock"
	"github.com/locktest/locktest/backend/registry"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/resource"
	"github.com/locktest/locktest/workload"
)

// teamLock is a team's own lock: a thin wrapper around concurrency.Mutex,
// as many teams write. To test it, implement lock.Recipe (here
// etcdlock.RecipeFunc, which hands it the client's etcd client),
// lock.Locker (Acquire and Close) and lock.Held (Token and Release); the
// optional interfaces (lock.Watched, etcdlock.Fenced, etcdlock.LeaseHolder)
// let the harness use more of it.
func teamLock() lock.Recipe {
	return etcdlock.RecipeFunc("team-mutex", func(ctx context.Context, env etcdlock.Env) (lock.Locker, error) {
		// NewSession keeps the lease alive through env.Client, on the
		// client's clock; ctx bounds only the grant.
		s, err := etcdlock.NewSession(ctx, env)
		if err != nil {
			return nil, err
		}
		return &teamLocker{env: env, s: s}, nil
	})
}

type teamLocker struct {
	env etcdlock.Env
	s   *concurrency.Session
}

func (l *teamLocker) Acquire(ctx context.Context, name string) (lock.Held, error) {
	m := concurrency.NewMutex(l.s, l.env.Prefix+name)
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	// The fencing token: the create revision of the mutex's key.
	resp, err := l.env.Client.Get(ctx, m.Key())
	if err != nil || len(resp.Kvs) == 0 {
		m.Unlock(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("%w: reading the lock key: %v", lock.ErrNotAcquired, err)
	}
	return &teamHeld{m: m, s: l.s, token: resp.Kvs[0].CreateRevision}, nil
}

func (l *teamLocker) Close() error { return l.s.Close() }

// The session's lease, for the harness's lease faults and crashes.
func (l *teamLocker) LeaseID() clientv3.LeaseID { return l.s.Lease() }
func (l *teamLocker) Done() <-chan struct{}     { return l.s.Done() }
func (l *teamLocker) Orphan()                   { l.s.Orphan() }

type teamHeld struct {
	m     *concurrency.Mutex
	s     *concurrency.Session
	token int64
}

func (h *teamHeld) Token() int64                      { return h.token }
func (h *teamHeld) Release(ctx context.Context) error { return h.m.Unlock(ctx) }

// Optional: tell the holder its session ended (the session guard and the
// lease-lost events use it), and fence the etcd-txn resource.
func (h *teamHeld) Done() <-chan struct{} { return h.s.Done() }
func (h *teamHeld) Guard() clientv3.Cmp   { return h.m.IsOwner() }

// Testing a team's own lock: run the whole harness against it (a real
// cluster, contending clients, paused holders) and assert on the verdicts,
// from an ordinary go test.
func Example() {
	dir, err := os.MkdirTemp("", "teamlock")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	cfg := workload.DefaultConfig()
	cfg.Recipe = teamLock()
	cfg.Seed = 7
	res, err := harness.Run(context.Background(), harness.Options{
		Backends: registry.Backends(),
		Dir:      dir,
		Workload: cfg,
		Resource: resource.Fenced,
		Time:     4 * time.Second,
		Quiet:    time.Second,
		Nemesis:  nemesis.Config{Faults: []string{"pause"}, Interval: 500 * time.Millisecond},
	})
	if err != nil {
		panic(err)
	}
	for _, c := range res.Checks {
		if c.Name == "resource" || c.Name == "consistency" {
			fmt.Println(c.Name, c.Verdict)
		}
	}
	fmt.Println("acquired:", res.Run.Stats.Acquisitions > 0)
	// Output:
	// resource valid
	// consistency valid
	// acquired: true
}

// Playing a catalog scenario with a team's own lock: harness.Play applies
// the scenario's settings and stages its schedule; the results say whether
// the lock met the verdicts the scenario expects of a correct one.
func ExamplePlay() {
	dir, err := os.MkdirTemp("", "teamlock")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	sc, err := registry.Backends().Catalog().Lookup("paused-holder")
	if err != nil {
		panic(err)
	}
	cfg := workload.DefaultConfig()
	cfg.Recipe = teamLock()
	cfg.Seed = 7
	o, err := harness.Play(harness.Options{Backends: registry.Backends(), Dir: dir, Workload: cfg, Resource: resource.Fenced}, sc)
	if err != nil {
		panic(err)
	}
	res, err := harness.Run(context.Background(), o)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Scenario.Name, "as expected:", *res.Scenario.Met)
	// Output:
	// paused-holder as expected: true
}
