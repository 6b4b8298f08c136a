package postgres

import (
	"context"
	"sync"
	"time"

	"github.com/locktest/locktest/backend/postgres/pglock"
	"github.com/locktest/locktest/backend/postgres/pgserver"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/workload"
)

// run is PostgreSQL as the workload reaches it in one run: each client's
// connection is a *pglock.Conn over its own link; the observer reads the
// server's pg_locks, lease rows and log (observer.go) and attributes what
// it sees to the grants the connections note (grants). PostgreSQL orders
// no lock's grant against its end by a revision the history records.
type run struct {
	s      *pgserver.Server
	grants *grants
}

// Workload is the workload.Backend of a pgserver, for one run.
func Workload(s *pgserver.Server) workload.Backend {
	return &run{s: s, grants: &grants{closed: map[uint32]bool{}}}
}

func (r *run) Name() string { return Name }

func (r *run) ResourceProxy(client, upstream string) (string, error) {
	return r.s.ResourceProxy(client, upstream)
}

func (r *run) Connect(c workload.Client) (workload.Conn, error) {
	ep, err := r.s.Endpoint(c.Name)
	if err != nil {
		return nil, err
	}
	pc := &pglock.Conn{Addr: ep, Client: c.Name, IdleTimeout: r.s.IdleTimeout()}
	return &conn{run: r, name: c.Name, pc: pc}, nil
}

func (r *run) Observe(ctx context.Context, keys workload.Keys, rec workload.Recorder) (workload.Observer, error) {
	return startObserver(ctx, r.s, r.grants, keys, rec)
}

// conn is one client's connection.
type conn struct {
	run  *run
	name string
	pc   *pglock.Conn
}

func (c *conn) Env() any            { return c.pc }
func (c *conn) Endpoints() []string { return []string{c.pc.Addr} }
func (c *conn) Close() error        { return nil }
func (c *conn) Acquiring()          {}

// Locker: the history names no lease; a session's end is the observer's
// to tell.
func (c *conn) Locker(lock.Locker, histories.Process) string { return "" }

// CloseLocker notes that the locker's session is ended on purpose, so that
// the observer tells its locks' end from the server's.
func (c *conn) CloseLocker(l lock.Locker) error {
	if s, ok := l.(interface{ PID() uint32 }); ok {
		c.run.grants.closing(s.PID())
	}
	return l.Close()
}

// Granted notes the grant: its key and token, and the session that holds
// it (pglock.Sessioned) or its lease row (pglock.Leased). The history
// names no claim: no revision orders it.
func (c *conn) Granted(_ lock.Locker, held lock.Held, p histories.Process) workload.Grant {
	g := &grant{client: c.name, process: p, token: held.Token()}
	switch h := held.(type) {
	case pglock.Sessioned:
		g.key, g.pid = h.Key(), h.PID()
	case pglock.Leased:
		g.key, g.lease = h.Key(), true
	default:
		return noGrant{}
	}
	c.run.grants.add(g)
	return g
}

type noGrant struct{}

func (noGrant) Claim() workload.Claim { return workload.Claim{} }
func (noGrant) Releasing()            {}
func (noGrant) Released(error)        {}

// grant is one grant, as the observer attributes the server's changes to
// it.
type grant struct {
	key     string // the lock key: Prefix+name
	pid     uint32 // the session that holds it (advisory locks)
	lease   bool   // a lease row, told by its fence (the token)
	client  string
	process histories.Process
	token   int64

	mu        sync.Mutex
	releasing bool
	released  time.Time // zero until the release returned
}

func (g *grant) Claim() workload.Claim { return workload.Claim{} }

func (g *grant) Releasing() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.releasing = true
}

func (g *grant) Released(error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.released = time.Now()
}

// releaseGrace is how long a finished release still explains a lock's end
// the observer sees.
const releaseGrace = 2 * time.Second

// releasedItself reports whether the grant's own release explains its end
// seen now.
func (g *grant) releasedItself() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.releasing && (g.released.IsZero() || time.Since(g.released) < releaseGrace)
}

// grants are the run's grants, newest last, and the sessions closed on
// purpose.
type grants struct {
	mu     sync.Mutex
	all    []*grant
	closed map[uint32]bool
}

func (gs *grants) add(g *grant) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gs.all = append(gs.all, g)
}

func (gs *grants) closing(pid uint32) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gs.closed[pid] = true
}

func (gs *grants) closedOnPurpose(pid uint32) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.closed[pid]
}

// find returns the newest grant of key matching f, or nil.
func (gs *grants) find(key string, f func(*grant) bool) *grant {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	for i := len(gs.all) - 1; i >= 0; i-- {
		if g := gs.all[i]; g.key == key && f(g) {
			return g
		}
	}
	return nil
}
