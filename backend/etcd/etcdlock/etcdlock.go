// Package etcdlock is the etcd backend of package lock: the env an etcd
// recipe gets (the client's own *clientv3.Client), the optional interfaces
// that name etcd types (a guard compare for Txns, the lock key and its
// lease, a session lease), sessions kept alive on the client's clock, and
// the built-in etcd recipes, one file each.
//
// Built-in recipes (Builtins):
//
//   - mutex: concurrency.NewSession + concurrency.NewMutex.
//   - lock-rpc: etcd's server-side Lock API (v3lockpb Lock/Unlock under the
//     session's lease), as etcdctl lock and Jepsen's etcd suite use.
//   - election: concurrency.NewElection Campaign/Resign; the leader holds.
//     Campaign has a bug (phantom leadership), which locktest finds.
//   - election-checked: election, plus a read of the own key after
//     Campaign, refusing leadership when it is gone: the workaround.
//   - same-key: one fixed key created in a Txn (CreateRevision == 0) under
//     the session's lease; waiters watch it for its delete and retry, all at
//     once.
//   - polling: the same fixed key, but waiters sleep and retry every 50 ms
//     (Polling sets another interval); the session's keepalive is the
//     watchdog: SET NX PX carried over to etcd.
//   - mutex-retry-owned: a service's mutex that retries an Unlock that
//     failed, on the same session, with the delete fenced on the grant's
//     create revision, as the fix proposed for etcd#22082 does.
//   - election-retry-kept: an election whose service retries a Resign that
//     failed, with Resign keeping its leadership until its delete is
//     answered, as the fix proposed for etcd#22123 does.
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
//   - mutex-retry: the service's mutex whose retried Unlock deletes by key
//     name: a retry of an Unlock whose reply was lost deletes the session's
//     next grant (etcd#22082).
//   - election-retry: the election whose service retries a Resign that
//     failed: Resign forgot its leadership before its delete failed, the
//     retry returns nil, the key stays, and the next Campaign leads again
//     on it (etcd#22123).
package etcdlock

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/locktest/locktest/lock"
)

// Env is what an etcd recipe gets for one client.
type Env struct {
	lock.Env
	// Client is lock.Env.Conn: the client's own etcd client, over its own
	// links. Its Lease is the harness's clock-driven one: leases granted
	// and kept alive through it (concurrency.NewSession, NewSession below)
	// renew on the client's clock and stop while it is paused.
	Client *clientv3.Client
}

// RecipeFunc makes a lock.Recipe of a name and a function of an etcd Env;
// it refuses a connection that is not an etcd client.
func RecipeFunc(name string, newLocker func(ctx context.Context, env Env) (lock.Locker, error)) lock.Recipe {
	return lock.RecipeFunc(name, func(ctx context.Context, env lock.Env) (lock.Locker, error) {
		cli, ok := env.Conn.(*clientv3.Client)
		if !ok {
			return nil, fmt.Errorf("recipe %s needs an etcd client, got %T", name, env.Conn)
		}
		return newLocker(ctx, Env{Env: env, Client: cli})
	})
}

// Optional interfaces naming etcd types. The harness uses them where a
// recipe implements them.

// Fenced is implemented by a Held that can fence an etcd transaction: Guard
// is a comparison that holds exactly while the grant is current (for a
// lock key, its create revision equals the token). The etcd-txn resource
// writes with Txn(If(Guard)). Without it, that resource fences by token
// instead (it accepts a write whose token is at least the highest it has
// accepted).
type Fenced interface {
	Guard() clientv3.Cmp
}

// Keyed is implemented by a Held that is an etcd key under a lease (a
// lock.Keyed that tells its lease): the harness's observer then attributes
// that key's deletion (release, expiry, revoke) to the client, and the
// nemesis targets that lease.
type Keyed interface {
	lock.Keyed
	LeaseID() clientv3.LeaseID
}

// LeaseHolder is implemented by a Locker whose grants all hang on one lease
// it keeps alive (a session: lock.Session, whose Orphan stops the
// keepalives and revokes nothing): the harness's lease faults target
// LeaseID.
type LeaseHolder interface {
	lock.Session
	LeaseID() clientv3.LeaseID
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
	MutexRetryName      = "mutex-retry"
	MutexRetryOwnedName = "mutex-retry-owned"
	// The election of a service that retries a failed Resign, and the
	// same with the fix proposed for etcd#22123.
	ElectionRetryName     = "election-retry"
	ElectionRetryKeptName = "election-retry-kept"
)

// DefaultPollInterval is the polling recipe's retry interval.
const DefaultPollInterval = 50 * time.Millisecond

// Builtins are the built-in etcd recipes, the correct ones first: a new
// recipe is its file and its line here.
var Builtins = []lock.Builtin{
	{Name: MutexName, New: Mutex},
	{Name: LockRPCName, New: LockRPC},
	{Name: ElectionName, New: Election},
	{Name: ElectionCheckedName, New: ElectionChecked},
	{Name: SameKeyName, New: SameKey},
	{Name: PollingName, New: func() lock.Recipe { return Polling(DefaultPollInterval) }},
	{Name: MutexRetryOwnedName, New: MutexRetryOwned},
	{Name: ElectionRetryKeptName, New: ElectionRetryKept},
	{Name: CheckThenSetName, New: CheckThenSet, Broken: true},
	{Name: UnlockAnyName, New: UnlockAny, Broken: true},
	{Name: NoRenewName, New: NoRenew, Broken: true},
	{Name: Mutex34Name, New: Mutex34, Broken: true},
	{Name: MutexRetryName, New: MutexRetry, Broken: true},
	{Name: ElectionRetryName, New: ElectionRetry, Broken: true},
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
	return fmt.Errorf("%w: the session's lease is gone", lock.ErrNotAcquired)
}
