// Package lock is what locktest tests: a distributed lock on etcd, as a
// recipe. A team that wraps etcd in a lock of its own implements Recipe (and
// the Locker and Held it returns) and hands it to the harness, which runs it
// under the same clients, faults and checks as the built-in recipes; the
// built-ins implement the same interfaces.
//
// A recipe's only duties are the three of any lock: acquire, giving a
// fencing token that grows with every grant of that lock; release; and,
// optionally, tell the holder when it has lost the lock. Everything else
// (clocks, pauses, crashes, the critical section, recording the history) is
// the harness's.
//
// Built-in recipes (Names, Builtin):
//
//   - mutex: concurrency.NewSession + concurrency.NewMutex.
//   - lock-rpc: etcd's server-side Lock API (v3lockpb Lock/Unlock under the
//     session's lease), as etcdctl lock and Jepsen's etcd suite use.
//   - election: concurrency.NewElection Campaign/Resign; the leader holds.
//     Campaign has a bug (phantom leadership, below), which locktest finds.
//   - election-checked: election, plus a read of the own key after
//     Campaign, refusing leadership when it is gone: the workaround.
//   - same-key: one fixed key created in a Txn (CreateRevision == 0) under
//     the session's lease; waiters watch it for its delete and retry, all at
//     once.
//   - polling: the same fixed key, but waiters sleep and retry every 50 ms
//     (Polling sets another interval); the session's keepalive is the
//     watchdog: SET NX PX carried over to etcd.
//
// And broken on purpose, each a real mistake, which the checks must catch:
//
//   - check-then-set: Get the fixed key and Put it if absent: not atomic.
//   - unlock-any: the same-key lock whose release is a plain Delete of the
//     key, whoever holds it now.
//   - no-renew: the fixed key under a lease that nobody keeps alive: a
//     critical section longer than the TTL outlives the lock.
//   - mutex-3.4: the revision queue as concurrency.Mutex.Lock was before
//     the fix for etcd#11456: a waiter whose lease expired while it queued
//     is still told it holds the lock.
package lock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/locktest/locktest/clock"
)

// Env is what a recipe gets for one client.
type Env struct {
	// Client is the client's own etcd client, over its own links (faults
	// single it out). Its Lease is the harness's clock-driven one: leases
	// granted and kept alive through it (concurrency.NewSession, NewSession
	// below) renew on the client's clock and stop while it is paused.
	Client *clientv3.Client
	// Clock is the client's clock: use it for every time-based decision
	// (polling intervals, timeouts, TTL arithmetic), so that clock faults
	// act on the recipe.
	Clock *clock.Clock
	// TTL is the lease TTL in seconds.
	TTL int
	// Prefix is where this run's lock keys live; a lock named L should use
	// keys under Prefix+L.
	Prefix string
	// Name is the client's name, "c3".
	Name string
}

// Recipe makes lockers. It must be safe for concurrent use: the harness
// calls New for each client, and again whenever a client starts over (after
// an operation with an unknown outcome, a lost session or a crash).
type Recipe interface {
	// Name names the recipe in results.
	Name() string
	// New returns a locker for one client. ctx bounds only the setup (a
	// lease grant, say): anything that must outlive New, such as
	// keepalives, must not depend on it (NewSession takes care of that).
	New(ctx context.Context, env Env) (Locker, error)
}

// Locker is one client's handle on its locks. The harness uses it from one
// goroutine at a time.
type Locker interface {
	// Acquire blocks until the client holds lock name, or ctx ends, or the
	// attempt fails. An error wrapping ErrNotAcquired says the client
	// definitely does not hold the lock (nothing it did can grant it
	// later); any other error leaves the outcome unknown, and the harness
	// then drops this Locker (Close) and makes a new one.
	Acquire(ctx context.Context, name string) (Held, error)
	// Close releases the client's resources, e.g. revokes its lease, so
	// that nothing it holds outlives it.
	Close() error
}

// Held is one grant of a lock.
type Held interface {
	// Token is the grant's fencing token: it must grow with every grant of
	// the lock, across all clients (an etcd revision does).
	Token() int64
	// Release gives the lock up. An error leaves the outcome unknown.
	Release(ctx context.Context) error
}

// ErrNotAcquired is wrapped by an Acquire error that is definite: the
// client does not hold the lock.
var ErrNotAcquired = errors.New("lock: not acquired")

// Optional interfaces. The harness uses them where a recipe implements them.

// Watched is implemented by a Held that can tell when its client learned
// it lost the lock (its session ended): Done is closed then. The session
// guard refuses to write once it is closed, and the harness records a
// lease-lost event. Without it, the session guard always passes.
type Watched interface {
	Done() <-chan struct{}
}

// Fenced is implemented by a Held that can fence an etcd transaction: Guard
// is a comparison that holds exactly while the grant is current (for a
// lock key, its create revision equals the token). The etcd-txn resource
// writes with Txn(If(Guard)). Without it, that resource fences by token
// instead (it accepts a write whose token is at least the highest it has
// accepted).
type Fenced interface {
	Guard() clientv3.Cmp
}

// Keyed is implemented by a Held that is an etcd key under a lease: the
// harness's observer then attributes that key's deletion (release, expiry,
// revoke) to the client, and the nemesis targets that lease.
type Keyed interface {
	Key() string
	LeaseID() clientv3.LeaseID
}

// Decided is implemented by a Held whose grant was decided on a server
// response the harness cannot see (a raw gRPC call, as lock-rpc's Lock):
// Revision is that response's header revision. The harness records the
// newest revision the client read during Acquire, or this if newer, as the
// state the grant was decided on (the contract check's promises 2 and 3).
type Decided interface {
	Revision() int64
}

// LeaseHolder is implemented by a Locker whose grants all hang on one lease
// it keeps alive (a session): the harness's lease faults target LeaseID, the
// clock guard reads the client's belief about its end, a crash calls Orphan
// (stop the keepalives, revoke nothing: the lease then expires on the
// server), and once Done is closed (the lease is gone) the harness replaces
// the Locker. Without it, a crash abandons the Locker without closing it.
type LeaseHolder interface {
	LeaseID() clientv3.LeaseID
	Done() <-chan struct{}
	Orphan()
}

// NewSession grants a lease of env.TTL through env.Client and keeps it alive
// until the session is closed or orphaned; ctx bounds only the grant. The
// keepalives go through env.Client's Lease, so in the harness they run on
// the client's clock.
func NewSession(ctx context.Context, env Env) (*concurrency.Session, error) {
	kctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel)
	s, err := concurrency.NewSession(env.Client, concurrency.WithTTL(env.TTL), concurrency.WithContext(kctx))
	if !stop() { // ctx ended during the grant: kctx is cancelled
		if err == nil {
			s.Orphan()
			err = ctx.Err()
		}
		return nil, err
	}
	if err != nil {
		cancel()
		return nil, err
	}
	go func() { <-s.Done(); cancel() }()
	return s, nil
}

// RecipeFunc makes a Recipe of a name and a function.
func RecipeFunc(name string, newLocker func(ctx context.Context, env Env) (Locker, error)) Recipe {
	return funcRecipe{name, newLocker}
}

type funcRecipe struct {
	name string
	f    func(context.Context, Env) (Locker, error)
}

func (r funcRecipe) Name() string { return r.name }

func (r funcRecipe) New(ctx context.Context, env Env) (Locker, error) { return r.f(ctx, env) }

// Built-in recipe names.
const (
	MutexName           = "mutex"
	LockRPCName         = "lock-rpc"
	ElectionName        = "election"
	SameKeyName         = "same-key"
	PollingName         = "polling"
	CheckThenSetName    = "check-then-set"
	UnlockAnyName       = "unlock-any"
	NoRenewName         = "no-renew"
	Mutex34Name         = "mutex-3.4"
	ElectionCheckedName = "election-checked"
)

// DefaultPollInterval is the polling recipe's retry interval.
const DefaultPollInterval = 50 * time.Millisecond

var builtins = map[string]func() Recipe{
	MutexName:           Mutex,
	LockRPCName:         LockRPC,
	ElectionName:        Election,
	SameKeyName:         SameKey,
	PollingName:         func() Recipe { return Polling(DefaultPollInterval) },
	CheckThenSetName:    CheckThenSet,
	UnlockAnyName:       UnlockAny,
	NoRenewName:         NoRenew,
	Mutex34Name:         Mutex34,
	ElectionCheckedName: ElectionChecked,
}

// Names lists the built-in recipes: the correct ones first, then the broken
// ones.
func Names() []string {
	return []string{MutexName, LockRPCName, ElectionName, ElectionCheckedName, SameKeyName, PollingName, CheckThenSetName, UnlockAnyName, NoRenewName, Mutex34Name}
}

// Broken reports whether a built-in recipe is broken on purpose.
func Broken(name string) bool {
	return slices.Contains([]string{CheckThenSetName, UnlockAnyName, NoRenewName, Mutex34Name}, name)
}

// Builtin returns the built-in recipe called name.
func Builtin(name string) (Recipe, error) {
	f, ok := builtins[name]
	if !ok {
		return nil, fmt.Errorf("unknown lock recipe %q (want one of %v)", name, Names())
	}
	return f(), nil
}

// session is the part of a session-based locker the harness sees through
// LeaseHolder.
type session struct {
	env Env
	s   *concurrency.Session
}

func newSessionLocker(ctx context.Context, env Env) (session, error) {
	s, err := NewSession(ctx, env)
	return session{env, s}, err
}

func (s session) LeaseID() clientv3.LeaseID { return s.s.Lease() }
func (s session) Done() <-chan struct{}     { return s.s.Done() }
func (s session) Orphan()                   { s.s.Orphan() }
func (s session) Close() error              { return s.s.Close() }

// sessionEnded says an acquire failed because the session is over.
func (s session) ended() error {
	return fmt.Errorf("%w: the session's lease is gone", ErrNotAcquired)
}
