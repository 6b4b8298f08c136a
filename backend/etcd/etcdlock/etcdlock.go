// Package etcdlock is the etcd backend of package lock: the env an etcd
// recipe gets (the client's own *clientv3.Client), the optional interfaces
// that name etcd types (a guard compare for Txns, the lock key and its
// lease, a session lease), sessions kept alive on the client's clock, and
// the built-in etcd recipes, one file each.
//
// The built-in recipes (Builtins) are listed, with what each does, in
// docs/reference/recipes.md, which `locktest docs` writes from them.
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
	{Name: MutexName, Doc: "`concurrency.NewSession` + `concurrency.NewMutex` (the default): a queue by create revision, each waiter watching the key before its own; the token is the lock key's create revision.", New: Mutex},
	{Name: LockRPCName, Doc: "etcd's server-side Lock API (`v3lockpb` Lock/Unlock under the session's lease): what `etcdctl lock` and Jepsen's etcd suite use.", New: LockRPC},
	{Name: ElectionName, Doc: "`concurrency.NewElection` Campaign/Resign: the leader is the holder. Campaign makes a candidate leader after its key was deleted while it waited (etcd#11051, etcd#19597).", New: Election},
	{Name: ElectionCheckedName, Doc: "`election`, plus a read of its own key after Campaign: leadership is refused when the key is gone (the workaround).", New: ElectionChecked},
	{Name: SameKeyName, Doc: "everyone creates one fixed key in a Txn (`CreateRevision == 0`) under its session's lease, and on failure watches it for its delete: every release wakes every waiter.", New: SameKey},
	{Name: PollingName, Doc: "the same fixed key, retried every `--poll-interval` (50 ms) instead of watched; the session's keepalive is the watchdog: `SET NX PX` carried over to etcd.", New: func() lock.Recipe { return Polling(DefaultPollInterval) }},
	{Name: MutexRetryOwnedName, Doc: "`mutex-retry` whose retried delete takes effect only while the Mutex still owns that grant (a Txn comparing the key's create revision with the grant's), as the fix proposed for etcd#22082 (pull request 22115) does. It leaves a gap (locktest found it under `--nemesis all`): when the failed delete never reached etcd (its request lost, not only its reply), the same session's next Lock takes the very same key at the same create revision, whose token does not grow (contract promise 1), and the fenced retry then deletes that grant's key.", New: MutexRetryOwned},
	{Name: ElectionRetryKeptName, Doc: "an election whose service retries a `Resign` that failed, with `Resign` keeping its leadership until its delete is answered, as the fix proposed for etcd#22123 does. Its Campaign is etcd 3.6.16's, as `election`'s: a candidate whose key was deleted while it waited still leads (etcd#11051; contract promise 2).", New: ElectionRetryKept},
	{Name: CheckThenSetName, Doc: "broken on purpose: Get the key, Put it if absent; not atomic.", New: CheckThenSet, Broken: true},
	{Name: UnlockAnyName, Doc: "broken on purpose: the same-key lock whose release is a plain Delete of the key, whoever holds it now (the oversold-stock bug).", New: UnlockAny, Broken: true},
	{Name: NoRenewName, Doc: "broken on purpose: the fixed key under a lease that nobody keeps alive: a critical section longer than the TTL outlives the lock.", New: NoRenew, Broken: true},
	{Name: Mutex34Name, Doc: "broken on purpose: the revision queue as `concurrency.Mutex.Lock` was before the fix for etcd#11456 (the bug Jepsen found in etcd 3.4): a waiter whose lease expired while it queued is still told it holds the lock.", New: Mutex34, Broken: true},
	{Name: MutexRetryName, Doc: "broken the way services are (etcd#22082): `concurrency.Mutex` on one session for the service's life, whose failed `Unlock` is retried after the service's next `Lock`; etcd names the key after the session's lease, so the retried delete removes the new grant's key.", New: MutexRetry, Broken: true},
	{Name: ElectionRetryName, Doc: "broken the way services are (etcd#22123): the election whose service retries a `Resign` that failed: etcd 3.6.16's `Resign` forgot its leadership before its delete failed, the retry returns nil, the key stays, and the next Campaign leads again on it.", New: ElectionRetry, Broken: true},
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
