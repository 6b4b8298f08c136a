package etcd

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locktest/locktest/backend/etcd/etcdlock"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/resource"
	"github.com/locktest/locktest/workload"
)

// Cluster is what etcd's side of a run needs of its servers: an etcd client
// and a link to the resource for each named client, each over links of its
// own so that faults can single one client out, and clients dialled
// directly to the members for the observer and the final reads.
// *cluster.Cluster and *cluster.External are ones.
type Cluster interface {
	Client(name string) (*clientv3.Client, error)
	Endpoints(client string) ([]string, error)
	ResourceProxy(client, upstream string) (string, error)
	MemberNames() []string
	DirectClient(members ...int) (*clientv3.Client, error)
}

// run is etcd as the workload reaches it in one run (a workload.Backend
// and Keeper). Each client's connection is its own *clientv3.Client over
// its own links, with the client's clock in charge of its leases
// (clockLease) and every read noted for the decision revision of its grants
// (revisions); the etcd-txn resource lives in it; the observer watches the
// members directly (observer.go) and tells who deleted a key by what the
// connections note (deletions).
type run struct {
	cl  Cluster
	del *deletions

	mu     sync.Mutex
	direct *clientv3.Client // to the members, for the keys of grants (claimOf)
}

// Workload is the workload.Backend of an etcd cluster, for one run.
func Workload(cl Cluster) workload.Keeper { return &run{cl: cl, del: newDeletions()} }

func (r *run) Name() string { return Name }

func (r *run) ResourceProxy(client, upstream string) (string, error) {
	return r.cl.ResourceProxy(client, upstream)
}

func (r *run) Connect(c workload.Client) (workload.Conn, error) {
	eps, err := r.cl.Endpoints(c.Name)
	if err != nil {
		return nil, err
	}
	cli, err := r.cl.Client(c.Name)
	if err != nil {
		return nil, err
	}
	cn := &conn{run: r, name: c.Name, cli: cli, eps: eps, revs: &revisions{}}
	// Sessions grant and keep their leases alive through the client's
	// embedded Lease: this puts the client's clock in charge.
	cn.lease = newClockLease(cli.Lease, c.Clock, c.Paused)
	cli.Lease = cn.lease
	// Every read the client's lock makes is noted, for the decision
	// revision of its grants.
	cli.KV = trackedKV{cli.KV, cn.revs}
	cli.Watcher = trackedWatcher{cli.Watcher, cn.revs}
	return cn, nil
}

func (r *run) Observe(ctx context.Context, keys workload.Keys, rec workload.Recorder) (workload.Observer, error) {
	o, err := startObserver(ctx, r.cl, r.del, keys.Prefix, rec)
	if err != nil {
		return nil, err
	}
	return workload.CloseAlso(o, r.closeDirect), nil
}

// claimOf is the lease and the create revision of key on the server, and
// the revision the server had come to, read over a direct link (0, 0: no
// such key, or not known within a second; at 0: not known): for a grant
// that tells its key only, and after its release. The read is linearizable
// (etcd's default) and made after the grant's reply, so at bounds the
// grant's decision revision from above: the decision was made on a state
// committed before the reply, and the read sees it or a later one.
func (r *run) claimOf(key string) (lease clientv3.LeaseID, created, at int64) {
	r.mu.Lock()
	if r.direct == nil {
		r.direct, _ = r.cl.DirectClient()
	}
	direct := r.direct
	r.mu.Unlock()
	if direct == nil || key == "" {
		return 0, 0, 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := direct.Get(ctx, key)
	if err != nil {
		return 0, 0, 0
	}
	if len(resp.Kvs) == 0 {
		return 0, 0, resp.Header.Revision
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease), resp.Kvs[0].CreateRevision, resp.Header.Revision
}

func (r *run) closeDirect() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.direct != nil {
		r.direct.Close()
		r.direct = nil
	}
}

// Store is the etcd-txn resource over c's links, or over a direct link for
// the final reads.
func (r *run) Store(c workload.Conn, mode resource.Mode, prefix string) (workload.Store, error) {
	if mode != TxnMode {
		return nil, fmt.Errorf("etcd keeps no %s resource", mode)
	}
	if c == nil {
		direct, err := r.cl.DirectClient()
		if err != nil {
			return nil, err
		}
		return txnStore{NewTxn(direct, TxnPrefix(prefix)), direct.Close}, nil
	}
	cn, ok := c.(*conn)
	if !ok {
		return nil, fmt.Errorf("etcd: a connection of another backend (%T)", c)
	}
	return txnStore{NewTxn(cn.cli, TxnPrefix(prefix)), nil}, nil
}

// conn is one client's connection.
type conn struct {
	run   *run
	name  string
	cli   *clientv3.Client
	eps   []string
	lease *clockLease
	revs  *revisions
}

func (c *conn) Env() any { return c.cli }

func (c *conn) Endpoints() []string { return c.eps }

func (c *conn) Close() error { return c.cli.Close() }

// Vars: etcd's clients dial URLs (a lock in another process is told them
// as LOCKTEST_ETCD_URLS, beside the host:port of LOCKTEST_ENDPOINTS).
func (c *conn) Vars() map[string]string {
	urls := make([]string, len(c.eps))
	for i, ep := range c.eps {
		urls[i] = "http://" + ep
	}
	return map[string]string{"LOCKTEST_ETCD_URLS": strings.Join(urls, ",")}
}

// Locker names the session's lease of a locker that keeps one
// (etcdlock.LeaseHolder), and notes whose it is for the observer.
func (c *conn) Locker(l lock.Locker, p histories.Process) string {
	lh, ok := l.(etcdlock.LeaseHolder)
	if !ok {
		return ""
	}
	id := lh.LeaseID()
	c.run.del.registerLease(id, c.name, p)
	return leaseHex(id)
}

// CloseLocker closes l, which revokes its session's lease: the observer is
// told that the client revoked it, and the client's clock lets it go.
func (c *conn) CloseLocker(l lock.Locker) error {
	if lh, ok := l.(etcdlock.LeaseHolder); ok {
		id := lh.LeaseID()
		c.run.del.intendRevoke(id)
		defer c.lease.forget(id)
	}
	return l.Close()
}

func (c *conn) Acquiring() { c.revs.reset() }

// Granted takes the grant's decision revision (the lock's own word,
// lock.Decided, else the newest revision it read), its key and lease (etcdlock.Keyed; for a
// Held that tells its key only, lock.Keyed, the key's lease on the server;
// else the locker's session), and notes whose lease it is.
func (c *conn) Granted(l lock.Locker, held lock.Held, p histories.Process) workload.Grant {
	g := &grant{conn: c, token: held.Token(), decided: c.revs.newest()}
	if d, ok := held.(lock.Decided); ok {
		// Not the newest read: a lock may read a later state after it
		// decided (lock-rpc looks up its token once granted), and a key
		// gone by then was not gone when it decided.
		g.decided = d.Revision()
	}
	lh, _ := l.(etcdlock.LeaseHolder)
	switch k := held.(type) {
	case etcdlock.Keyed:
		g.key, g.lease = k.Key(), k.LeaseID()
		// A bound only where the token is the key's create revision, as
		// the contract takes it (check-then-set's Put may overwrite a
		// key: its token is then the Put's revision).
		if _, created, at := c.run.claimOf(g.key); created == g.token {
			g.decidedBy = at
		}
	case lock.Keyed:
		g.key, g.keyOnly = k.Key(), true
		g.lease, g.created, g.decidedBy = c.run.claimOf(g.key)
		if g.created != g.token {
			// The contract judges a claim as the key created at the
			// token's revision: a lock whose token is something else is
			// not judged by its decision, nor bounded. (A key gone
			// already is judged by the lock's word: only a deletion of
			// the key created at the token's revision can make its grant
			// one of a lost lock.)
			g.decidedBy = 0
			if g.created != 0 {
				g.decided = 0
			}
		}
	default:
		if lh != nil {
			g.lease = lh.LeaseID()
		}
	}
	// A lease of the grant's own, not its locker's session, is let go of
	// with the grant.
	g.own = lh == nil || g.lease != lh.LeaseID()
	if g.lease != 0 {
		c.run.del.registerLease(g.lease, c.name, p)
	}
	if g.key != "" {
		c.run.del.granted(g.key, g.token, c.name)
	}
	return g
}

// grant is one grant of a client's lock.
type grant struct {
	conn    *conn
	token   int64
	decided int64
	// decidedBy is the revision of a linearizable read past every
	// client's link after the grant's reply: the decision was at or
	// before it (0: not read, or the token is not the key's create
	// revision).
	decidedBy int64
	key       string           // its etcd key, if the recipe tells (etcdlock.Keyed)
	lease     clientv3.LeaseID // its lease, if known; else 0
	own       bool             // the lease is the grant's own, not its locker's session
	// keyOnly says the lock told its key only (lock.Keyed: a lock in
	// another process, whose reads the connection does not see), and
	// created is that key's create revision at the grant (0: gone, or
	// not known).
	keyOnly bool
	created int64
}

// rev is the revision the grant's key was created at, for the observer:
// the server's word for a lock that told its key only, else its token
// (every built-in's token is its key's create revision).
func (g *grant) rev() int64 {
	if g.created != 0 {
		return g.created
	}
	return g.token
}

func (g *grant) Claim() workload.Claim {
	cl := workload.Claim{Key: g.key, Decided: g.decided, DecidedBy: g.decidedBy}
	if g.lease != 0 {
		cl.Lease = leaseHex(g.lease)
	}
	return cl
}

// Releasing tells the observer that the owner is about to delete its key.
func (g *grant) Releasing() {
	if g.key != "" {
		g.conn.run.del.intendRelease(g.key, g.rev(), g.conn.name)
	}
	g.conn.revs.reset()
}

// Released gives the observer the release's own word on what it deleted.
func (g *grant) Released(err error) {
	if g.key != "" {
		until := g.conn.revs.newest()
		switch {
		case g.keyOnly:
			// Its release was made out of the connection's sight: what
			// it deleted, it deleted before the server's revision now. (A
			// release of unknown outcome that deletes later is told as no
			// release: an intent kept past its release could make another
			// client's deletion look like this one's.)
			_, _, until = g.conn.run.claimOf(g.key)
		case err != nil:
			until = 0 // unknown: it may still delete
		}
		g.conn.run.del.releaseDone(g.key, g.rev(), until, g.conn.revs.deletedAt(), g.conn.name)
	}
	if g.own {
		g.conn.lease.forget(g.lease)
	}
}

// txnStore is the etcd-txn resource as a client reaches it: a write
// commits only if the grant's compare holds (etcdlock.Fenced), or, for a
// recipe without one, if its token is at least the highest accepted.
type txnStore struct {
	*Txn
	close func() error // the direct link of the final reads; nil for a client's
}

func (s txnStore) Write(ctx context.Context, key string, token, value int64, held lock.Held) error {
	if f, ok := held.(etcdlock.Fenced); ok {
		return s.Txn.Write(ctx, key, value, f.Guard())
	}
	return s.WriteFenced(ctx, key, token, value)
}

func (s txnStore) Close() {
	if s.close != nil {
		s.close()
	}
}
