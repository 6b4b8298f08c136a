package mysql

import (
	"context"
	"sync"
	"time"

	"github.com/locktest/locktest/backend/mysql/mysqllock"
	"github.com/locktest/locktest/backend/mysql/mysqlserver"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/workload"
)

// run is MariaDB as the workload reaches it in one run: each client's
// connection is a *mysqllock.Conn over its own link; the observer reads
// IS_USED_LOCK and the server's error log (observer.go) and attributes
// what it sees to the grants the connections note. The server orders no
// grant against its end by a revision the history records.
type run struct {
	s      *mysqlserver.Server
	grants *grants
}

// Workload is the workload.Backend of a mysqlserver, for one run.
func Workload(s *mysqlserver.Server) workload.Backend {
	return &run{s: s, grants: &grants{closed: map[int64]bool{}}}
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
	return &conn{run: r, name: c.Name, mc: &mysqllock.Conn{Addr: ep, IdleTimeout: r.s.IdleTimeout()}}, nil
}

func (r *run) Observe(ctx context.Context, keys workload.Keys, rec workload.Recorder) (workload.Observer, error) {
	return startObserver(ctx, r.s, r.grants, keys, rec)
}

type conn struct {
	run  *run
	name string
	mc   *mysqllock.Conn
}

func (c *conn) Env() any                                     { return c.mc }
func (c *conn) Endpoints() []string                          { return []string{c.mc.Addr} }
func (c *conn) Close() error                                 { return nil }
func (c *conn) Acquiring()                                   {}
func (c *conn) Locker(lock.Locker, histories.Process) string { return "" }

// CloseLocker notes that the locker's session is ended on purpose.
func (c *conn) CloseLocker(l lock.Locker) error {
	if s, ok := l.(interface{ ID() int64 }); ok {
		c.run.grants.closing(s.ID())
	}
	return l.Close()
}

// Granted notes a grant of a session's lock (mysqllock.Sessioned).
func (c *conn) Granted(_ lock.Locker, held lock.Held, p histories.Process) workload.Grant {
	h, ok := held.(mysqllock.Sessioned)
	if !ok {
		return noGrant{}
	}
	g := &grant{key: h.Key(), id: h.ID(), pid: c.run.s.Pid(), client: c.name, process: p, token: held.Token()}
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
	key     string
	id      int64 // the session holding it
	pid     int   // the server process whose session it is: IDs start over with each
	client  string
	process histories.Process
	token   int64

	mu        sync.Mutex
	releasing bool
	released  time.Time
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

// releaseGrace is how long a finished release still explains a lock's end.
const releaseGrace = 2 * time.Second

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
	closed map[int64]bool
}

func (gs *grants) add(g *grant) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gs.all = append(gs.all, g)
}

func (gs *grants) closing(id int64) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gs.closed[id] = true
}

func (gs *grants) closedOnPurpose(id int64) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.closed[id]
}

// find returns the newest grant of key held by session id of server
// process pid, or nil.
func (gs *grants) find(key string, id int64, pid int) *grant {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	for i := len(gs.all) - 1; i >= 0; i-- {
		if g := gs.all[i]; g.key == key && g.id == id && g.pid == pid {
			return g
		}
	}
	return nil
}
