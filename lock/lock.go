// Package lock is what locktest tests: a distributed lock, as a recipe. A
// team that wraps a lock service in a lock of its own implements Recipe
// (and the Locker and Held it returns) and hands it to the harness, which
// runs it under the same clients, faults and checks as the built-in
// recipes; the built-ins implement the same interfaces.
//
// A recipe's only duties are the three of any lock: acquire, giving a
// fencing token that grows with every grant of that lock; release; and,
// optionally, tell the holder when it has lost the lock. Everything else
// (clocks, pauses, crashes, the critical section, recording the history) is
// the harness's.
//
// This package names no lock service. What a recipe gets to reach its
// service is Env.Conn; each backend (a folder under backend/) has a package
// of its own with a typed Env, its optional interfaces and its built-in
// recipes: etcd's is backend/etcd/etcdlock, Redis's backend/redis/redislock.
package lock

import (
	"context"
	"errors"
	"time"

	"github.com/locktest/locktest/clock"
)

// Env is what a recipe gets for one client.
type Env struct {
	// Conn is the client's own connection to the system under test, over
	// its own links (faults single it out); its type is the backend's (see
	// the Env of the backend's recipe package).
	Conn any
	// Clock is the client's clock: use it for every time-based decision
	// (polling intervals, timeouts, TTL arithmetic), so that clock faults
	// act on the recipe.
	Clock *clock.Clock
	// TTL is the lease TTL in seconds.
	TTL int
	// Prefix is where this run's lock keys live; a lock named L should use
	// keys under Prefix+L.
	Prefix string
	// Backend names the run's backend ("etcd"), and Endpoints are the
	// host:port addresses of the client's own links to its servers, in
	// member order: what a lock that dials the servers itself needs (a
	// lock in another process, say).
	Backend   string
	Endpoints []string
	// Vars are what a lock in another process is told of the servers
	// beyond Endpoints, as environment variables, by the backend (etcd:
	// LOCKTEST_ETCD_URLS); nil when nothing.
	Vars map[string]string
	// Seed is the run's seed: a lock that draws at random draws from it.
	Seed int64
	// Name is the client's name, "c3".
	Name string
	// OpTimeout is how long the harness lets each acquire and release
	// take, on the client's clock: a lock that waits in another process
	// is told it.
	OpTimeout time.Duration
	// Dir is the run directory ("" when there is none): a recipe that
	// keeps files of its own (a lock in another process: its stderr) puts
	// them under it.
	Dir string
	// Paused, if set, blocks while the client is paused (a stop-the-world
	// pause of the nemesis), or until ctx ends (returning its error): a
	// lock's own background work (a watchdog's renewals) waits here before
	// each step, so that a pause of the client stops it too, as a pause of
	// its process would.
	Paused func(ctx context.Context) error
	// Logf, if set, takes a line for the run's log: what the user must
	// see as it happens (a lock in another process that broke its
	// protocol).
	Logf func(format string, args ...any)
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

// Decided is implemented by a Held that knows the server response its grant
// was decided on (a raw gRPC call the harness cannot see, as lock-rpc's
// Lock): Revision is that response's revision (the server's order of
// changes: an etcd revision). The harness records it as the state the grant
// was decided on (the contract check's promises 2 and 3), and not the
// newest revision the client read during Acquire: reads after the decision
// (lock-rpc looks up its token) saw a later state than the one decided on.
// Without it, the harness records that newest revision.
type Decided interface {
	Revision() int64
}

// Keyed is implemented by a Held that tells the key (or node) its grant
// holds on the server: the history records it, and the backend's observer
// attributes that key's deletion (a release, an expiry) to the grant. A
// backend's package may ask more of a Held (etcdlock.Keyed, its lease).
type Keyed interface {
	Key() string
}

// Sessioned is implemented by a Held that tells the session its client's
// lock was on when it answered the grant (a lock in another process whose
// reply says), as the service names it: the backend records it, and the
// contract check holds the grant's key to belong to that session. A lock
// that granted on a key of an earlier session of its own, which the
// servers still held, breaks that promise (CURATOR-696). "" when it does
// not say.
type Sessioned interface {
	Session() string
}

// Session is implemented by a Locker whose grants all hang on one session
// it keeps alive (an etcd lease, say): once Done is closed (the session is
// gone) the harness replaces the Locker.
type Session interface {
	Done() <-chan struct{}
	Orphaner
}

// Orphaner is implemented by a Locker that keeps its grants alive in the
// background (a session's keepalives, a watchdog that extends a lease): a
// crash of its client calls Orphan, which stops that and ends nothing, so
// that the server expires what it held, as after a process that died. A
// Locker without it is abandoned by a crash, as it is.
type Orphaner interface {
	Orphan()
}

// Retrier is implemented by a Locker that settles a release of unknown
// outcome itself: it retries the release on its own session, as a service
// retries an unlock that failed. The harness then keeps it after such a
// release, as the service keeps its session, where it would otherwise
// close it (and its session) and make a new one.
type Retrier interface {
	RetriesReleases()
}

// Unfenced is implemented by a Recipe whose Token is not a fencing token:
// it is not taken with the grant, so tokens need not grow in the order of
// the grants, and a fenced resource cannot rely on them. The history says
// so (its setup event), and the checks judge the tokens' order no more.
// The harness marks the built-ins that say so (Builtin.NoFencingToken).
type Unfenced interface {
	Recipe
	NoFencingToken()
}

// Untokened is implemented by a Held whose grant may carry no fencing
// token at all (a lock in another process whose reply gave none): when
// Untokened reports true, Token means nothing, the history records the
// grant without a token, and the holder reads and writes without one, so
// that a fenced resource cannot fence it, as it could not fence the
// lock's own users.
type Untokened interface {
	Untokened() bool
}

// Process is implemented by a Locker whose lock runs in an operating
// system process of its own (package execlock's): a pause of the client
// stops that process too (Stop when the pause begins, Continue when it
// ends), as a stop-the-world pause stops a lock's keepalive threads, and
// the time it spends stopped does not count against its operations'
// deadlines, as it does not on its own clock. Such a Locker is also kept
// after an Acquire that definitely failed, where another is replaced:
// starting a process again for every refusal would cost more than the
// lock.
type Process interface {
	Stop() error
	Continue() error
}

// Starter is implemented by a Recipe whose Lockers can fail for good (a
// command that is not there, or that exits as soon as it starts): the
// harness calls Start for every client before the run, instead of New for
// the client's first Locker, and an error stops the run before anything
// is recorded.
type Starter interface {
	Start(ctx context.Context, env Env) (Locker, error)
}

// Limited is implemented by a Recipe that cannot suffer some of the
// harness's fault families (a lock in another process whose runtime
// ignores a faked clock): Refuses says why it cannot suffer family (a
// --nemesis name, "clock"), or "" when it can. The harness refuses such a
// fault by name before the run, and --nemesis all leaves it out.
type Limited interface {
	Refuses(family string) string
}

// Described is implemented by a Recipe that says more of itself in the
// history's setup event than its name (the protocol version a lock in
// another process speaks): Params are added to the event's params.
type Described interface {
	Params() map[string]string
}

// MarkUnfenced returns r as Unfenced.
func MarkUnfenced(r Recipe) Unfenced {
	if u, ok := r.(Unfenced); ok {
		return u
	}
	return unfenced{r}
}

type unfenced struct{ Recipe }

func (unfenced) NoFencingToken() {}

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

// A Builtin is a recipe shipped with locktest, as a backend lists it.
type Builtin struct {
	Name string
	New  func() Recipe
	// Doc says how it locks, for the generated reference
	// (docs/reference/recipes.md).
	Doc string
	// Broken is set for a recipe broken on purpose: the checks must catch
	// it.
	Broken bool
	// NoFencingToken is set for a recipe whose Token is not a fencing
	// token (see Unfenced).
	NoFencingToken bool
	// Majority is set for a recipe whose grant takes a majority of the
	// members, each holding its own copy of the lock (Redlock's
	// independent masters): faults of a member then often strike a holder
	// granted on a bare majority (see nemesis.Config.Quorum).
	Majority bool
}
