package workload

import (
	"context"

	"github.com/locktest/locktest/clock"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/resource"
)

// The workload's side of the seam to a lock service: the small interfaces
// the clients need of the system under test, which each backend (a folder
// under backend/) implements. Nothing here names a lock service.

// Backend is the system under test as the workload reaches it, for one
// run: each client's own connection to it, its link to the resource, and
// the observer of the server's truth about lock keys.
type Backend interface {
	// Name names the backend in the history's setup event ("etcd").
	Name() string
	// ResourceProxy returns the address of client's own link to the
	// resource at upstream.
	ResourceProxy(client, upstream string) (string, error)
	// Connect makes one client's connection, over the client's own links.
	Connect(c Client) (Conn, error)
	// Observe starts the observer of the run's lock keys, recording into
	// rec.
	Observe(ctx context.Context, keys Keys, rec Recorder) (Observer, error)
}

// Client is what a backend is told of the client it connects.
type Client struct {
	// Name is the client's name, "c3".
	Name string
	// Clock is the client's clock: a connection's own timing (lease
	// keepalives) runs on it, so that clock faults act on it.
	Clock *clock.Clock
	// Paused blocks while the nemesis keeps the client paused (a
	// stop-the-world pause), or until ctx ends (returning its error): a
	// connection's background work (keepalives) waits here before each
	// step, so that a pause stops it too.
	Paused func(ctx context.Context) error
}

// Conn is one client's connection to the system under test, as its backend
// made it. The client calls it from its own goroutine; Close may come from
// another.
type Conn interface {
	// Env is the connection as a recipe gets it (lock.Env.Conn), of the
	// type the backend's recipe package says.
	Env() any
	// Endpoints are the host:port addresses of the client's own links to
	// the servers, in member order (lock.Env.Endpoints).
	Endpoints() []string
	// Locker notes a locker the recipe made for the client's process p,
	// and names the lease (or session) its grants hang on, as the history
	// writes it; "" if it keeps none. Lease faults strike that lease.
	Locker(l lock.Locker, p histories.Process) (lease string)
	// CloseLocker closes a locker the client drops on purpose, which ends
	// its lease: the backend notes that, so that its observer tells a
	// deletion of its keys from an expiry.
	CloseLocker(l lock.Locker) error
	// Acquiring is called just before each Acquire.
	Acquiring()
	// Granted is called when l, the client's current locker, granted held
	// to the client's process p: the backend's view of the grant, until
	// its release. A Held that tells only its key (lock.Keyed) leaves the
	// backend to find what else it can from the key (its lease).
	Granted(l lock.Locker, held lock.Held, p histories.Process) Grant
	// Close closes the connection.
	Close() error
}

// Vars is implemented by a Conn that tells a lock in another process more
// of the servers than Endpoints, as environment variables (lock.Env.Vars:
// etcd's LOCKTEST_ETCD_URLS).
type Vars interface {
	Vars() map[string]string
}

// Grant is a backend's view of one grant a client holds.
type Grant interface {
	// Claim is what the grant holds on the server.
	Claim() Claim
	// Releasing is called just before the holder releases the grant.
	Releasing()
	// Released is called once the release returned, with its error (the
	// outcome is then unknown: it may still take effect).
	Released(err error)
}

// Claim is what a grant holds on the server, as far as its backend can
// tell.
type Claim struct {
	// Key is the server's key (or node) the grant holds, when the lock
	// says which (lock.Keyed): the history records it as the grant's
	// claim, whose deletion ends it.
	Key string
	// Lease names the lease (or session) the claim hangs on, as the
	// history writes it; "" when none is known.
	Lease string
	// Session is the session the lock says it was on when it answered
	// the grant (lock.Sessioned), as the history writes leases: the
	// history records it as the grantee's, whose the claim should be; ""
	// when the lock does not say, or the backend cannot read it.
	Session string
	// Decided is the revision of the newest state the lock had read when
	// it granted (the contract check's decision revision); 0 when unknown,
	// or when the server orders its changes by no revision.
	Decided int64
	// DecidedBy is an upper bound on the decision revision that does not
	// depend on the lock's word: the revision of a linearizable read made
	// past every client's link after Acquire returned (0: none). It is
	// given only where the token is its key's create revision, which the
	// contract check takes it for.
	DecidedBy int64
	// Created is, for a grant without a token, its key's creation point
	// on the server, where the backend can read the grant's own (0: not
	// known); DecidedBy is then bounded against it.
	Created int64
}

// Keys are the lock keys of a run, as an observer watches them.
type Keys struct {
	// Prefix is where they live: a lock named L at Prefix+L, or under it.
	Prefix string
	// Locks are the lock names.
	Locks []string
}

// An Observer is a backend's view of the server's truth about lock keys,
// from outside every client's links (client faults do not blind it): it
// records each deletion of a client's lock key as a key-deleted event,
// saying why (the holder's release, its lease's expiry or revoke, another
// client's release), and how far it has seen.
type Observer interface {
	// Sync waits until the observer has seen every change made before the
	// call, or ctx ends.
	Sync(ctx context.Context) error
	// RecordObserved records the observed event: every deletion up to
	// the point it names is in the history.
	RecordObserved()
	// Err is the first error the observer met in recording.
	Err() error
	// Close stops it.
	Close()
}

// Queuer is an Observer that knows each lock's queue (ZooKeeper's): the
// clients whose nodes are in it now, oldest first ("" for a node whose
// client it does not know), as far as it has taken the servers' changes
// in.
type Queuer interface {
	Queue(lock string) []string
}

// CloseAlso is o, whose Close also calls also once o is closed: a backend's
// observer that shares a connection of its own with the run closes it so.
func CloseAlso(o Observer, also func()) Observer { return closeAlso{o, also} }

type closeAlso struct {
	Observer
	also func()
}

// Queue is o's, if o is a Queuer; else none known.
func (c closeAlso) Queue(lock string) []string {
	if q, ok := c.Observer.(Queuer); ok {
		return q.Queue(lock)
	}
	return nil
}

func (c closeAlso) Close() {
	c.Observer.Close()
	c.also()
}

// Keeper is a Backend that can keep the protected resource in the system
// under test itself, in resource modes of its own (etcd's etcd-txn): a
// write is then guarded by the lock on the server.
type Keeper interface {
	Backend
	// Store returns the resource of mode, for the locks under prefix,
	// over c (a Conn this backend made), or over a direct link when c is
	// nil (the final reads); an error for a mode it does not keep.
	Store(c Conn, mode resource.Mode, prefix string) (Store, error)
}
