package zookeeper

import (
	"context"
	"errors"
	"hash/fnv"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locktest/locktest/backend/zookeeper/zklock"
	"github.com/locktest/locktest/backend/zookeeper/zkserver"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/workload"
)

// run is ZooKeeper as the workload reaches it in one run (a
// workload.Backend): each client's connection is a *zklock.Client over the
// client's own links, whose sessions stop talking while the client is
// paused; each locker's session is noted as its owner's, for the observer
// (observer.go), which reads the servers' transaction logs.
type run struct {
	e     *zkserver.Ensemble
	notes *notes

	mu     sync.Mutex
	direct *zklock.Session // past every client's links: owners of nodes a grant only names
}

// Workload is the workload.Backend of an ensemble, for one run.
func Workload(e *zkserver.Ensemble) workload.Backend { return &run{e: e, notes: newNotes()} }

func (r *run) Name() string { return Name }

func (r *run) ResourceProxy(client, upstream string) (string, error) {
	return r.e.ResourceProxy(client, upstream)
}

// Connect gives the client its links to every server; its sessions try
// them from a server of its own (client cN from server N modulo their
// number), so that the clients' sessions spread over the ensemble as a
// deployment's do, the same way in every run.
func (r *run) Connect(c workload.Client) (workload.Conn, error) {
	eps, err := r.e.Endpoints(c.Name)
	if err != nil {
		return nil, err
	}
	first := firstServer(c.Name, len(eps))
	order := append(append([]string(nil), eps[first:]...), eps[:first]...)
	zc := &zklock.Client{Servers: order, Clock: c.Clock, Paused: c.Paused}
	return &conn{run: r, name: c.Name, client: zc, eps: eps}, nil
}

// firstServer is the server client's sessions try first.
func firstServer(client string, n int) int {
	if i, err := strconv.Atoi(strings.TrimLeft(client, "abcdefghijklmnopqrstuvwxyz")); err == nil && i >= 0 {
		return i % n
	}
	h := fnv.New32a()
	h.Write([]byte(client))
	return int(h.Sum32() % uint32(n))
}

func (r *run) Observe(ctx context.Context, keys workload.Keys, rec workload.Recorder) (workload.Observer, error) {
	return workload.CloseAlso(startObserver(r.e, r.notes, keys.Prefix, keys.Locks, rec), r.closeDirect), nil
}

// ownerOf is the session that owns node on the servers (0: none, or not
// known within a second), read past every client's links: for a grant
// that tells its node only.
func (r *run) ownerOf(node string) int64 {
	direct := r.session()
	if direct == nil {
		return 0
	}
	_, st, err := direct.Conn.Exists(node)
	if err != nil || st == nil {
		return 0
	}
	return st.EphemeralOwner
}

// session is the session past every client's links, connected at first
// use and again once lost (an outage past its timeout expires it; nil: it
// could not connect within a second).
func (r *run) session() *zklock.Session {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.direct != nil {
		select {
		case <-r.direct.Done():
			r.direct.Close()
			r.direct = nil
		default:
		}
	}
	if r.direct == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r.direct, _ = (&zklock.Client{Servers: r.e.ClientAddrs()}).Connect(ctx, 10*time.Second)
		cancel()
	}
	return r.direct
}

// bounds reads, past every client's links after a grant's reply, node's
// creation zxid (czxid) and an upper bound on the grant's decision zxid:
// the Pzxid of node's parent (the zxid of the last creation or deletion
// of a child of it; a child deleted at a higher zxid was still there at
// the decision), read after a write of this session's own. A sync is not
// enough: a leader paused past an election and resumed still answers a
// sync and the reads after it from its old state until it learns it lost
// its quorum (seen: a bound of zxid 0x10000001d for a grant decided at
// 0x200000007, in the new epoch); a write commits only through the
// current leader's quorum, and the session's reads after it see it, so
// they see every change committed before the reply. 0, 0 when not known
// within a second, or node is gone.
func (r *run) bounds(node string) (czxid, pzxid int64) {
	direct := r.session()
	if direct == nil || node == "" {
		return 0, 0
	}
	dir := path.Dir(node)
	done := make(chan [2]int64, 1)
	go func() {
		var got [2]int64
		defer func() { done <- got }()
		if _, err := direct.Conn.Set(boundsProbe, nil, -1); errors.Is(err, zk.ErrNoNode) {
			_, err = direct.Conn.Create(boundsProbe, nil, 0, zk.WorldACL(zk.PermAll))
			if errors.Is(err, zk.ErrNodeExists) {
				_, err = direct.Conn.Set(boundsProbe, nil, -1)
			}
			if err != nil {
				return
			}
		} else if err != nil {
			return
		}
		_, st, err := direct.Conn.Exists(node)
		if err != nil || st == nil || st.Czxid == 0 {
			return
		}
		_, dst, err := direct.Conn.Exists(dir)
		if err != nil || dst == nil {
			return
		}
		got = [2]int64{st.Czxid, dst.Pzxid}
	}()
	select {
	case got := <-done:
		return got[0], got[1]
	case <-time.After(time.Second):
		return 0, 0
	}
}

// boundsProbe is the znode bounds writes, outside every lock's folder.
const boundsProbe = "/locktest-bounds"

func (r *run) closeDirect() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.direct != nil {
		r.direct.Close()
		r.direct = nil
	}
}

// conn is one client's connection.
type conn struct {
	run    *run
	name   string
	client *zklock.Client
	eps    []string
}

func (c *conn) Env() any { return c.client }

func (c *conn) Endpoints() []string { return c.eps }

// Close: the client's sessions are its lockers', which the workload
// closes.
func (c *conn) Close() error { return nil }

// Locker names the session of a locker that tells it (zklock.Owned), and
// notes whose it is for the observer.
func (c *conn) Locker(l lock.Locker, p histories.Process) string {
	o, ok := l.(zklock.Owned)
	if !ok {
		return ""
	}
	c.run.notes.session(o.SessionID(), c.name, p)
	return sessionHex(o.SessionID())
}

// CloseLocker closes l, which ends its session: the servers' log says the
// client closed it.
func (c *conn) CloseLocker(l lock.Locker) error { return l.Close() }

func (c *conn) Acquiring() {}

// Granted takes the grant's node (lock.Keyed), its decision zxid
// (lock.Decided) and its session (zklock.Owned; else its locker's, else
// the node's owner on the servers), and notes the node as granted: its
// owner's delete of it is then a release, not an acquire's clean-up.
func (c *conn) Granted(l lock.Locker, held lock.Held, p histories.Process) workload.Grant {
	g := &grant{notes: c.run.notes, token: held.Token()}
	if d, ok := held.(lock.Decided); ok {
		g.decided = d.Revision()
	}
	if k, ok := held.(lock.Keyed); ok {
		g.node = k.Key()
	}
	switch o := held.(type) {
	case zklock.Owned:
		g.session = o.SessionID()
	default:
		if lo, ok := l.(zklock.Owned); ok {
			g.session = lo.SessionID()
		} else if g.node != "" {
			g.session = c.run.ownerOf(g.node)
		}
	}
	if g.session != 0 {
		c.run.notes.session(g.session, c.name, p)
	}
	if s, ok := held.(lock.Sessioned); ok {
		g.told = toldSession(s.Session())
	}
	if g.node != "" {
		c.run.notes.granted(g.node)
		// The contract takes a token for its node's czxid: a bound only
		// where it is. A grant without a token gets its node's czxid, its
		// own (a sequential znode's name is never reused).
		czxid, pzxid := c.run.bounds(g.node)
		if u, ok := held.(lock.Untokened); ok && u.Untokened() {
			g.created, g.decidedBy = czxid, pzxid
		} else if czxid == g.token {
			g.decidedBy = pzxid
		}
	}
	return g
}

// grant is one grant of a client's lock.
type grant struct {
	notes     *notes
	token     int64
	decided   int64
	decidedBy int64  // see run.bounds
	created   int64  // of a grant without a token: its node's czxid (0: not known)
	node      string // "" if the recipe does not tell (lock.Keyed)
	session   int64  // 0 if not known
	told      string // the session the lock says it granted on, as sessionHex writes it ("": not said)
}

func (g *grant) Claim() workload.Claim {
	cl := workload.Claim{Key: g.node, Decided: g.decided, DecidedBy: g.decidedBy, Created: g.created, Session: g.told}
	if g.session != 0 {
		cl.Lease = sessionHex(g.session)
	}
	return cl
}

// Releasing notes which token the session is releasing, for the story of
// a release that deletes another's node.
func (g *grant) Releasing() {
	if g.session != 0 {
		g.notes.releasing(g.session, g.token)
	}
}

func (g *grant) Released(error) {
	if g.session != 0 {
		g.notes.releasing(g.session, 0)
	}
}

// sessionHex writes a session id as the history does (and ZooKeeper's
// logs, after "0x").
func sessionHex(id int64) string { return strconv.FormatInt(id, 16) }

// toldSession is a session id a lock told in hexadecimal ("0x1000a3b2c0004",
// as ZooKeeper logs it, or without the 0x), as sessionHex writes it; "" for
// anything else, which is then not judged.
func toldSession(s string) string {
	s = strings.TrimPrefix(strings.ToLower(s), "0x")
	id, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return ""
	}
	return sessionHex(int64(id))
}

// notes are what the clients' connections tell the observer: whose each
// session is, which nodes were granted, which token a session is
// releasing.
type notes struct {
	mu       sync.Mutex
	owners   map[int64]owner
	grants   map[string]bool
	releases map[int64]int64
}

type owner struct {
	client  string
	process histories.Process
}

func newNotes() *notes {
	return &notes{owners: map[int64]owner{}, grants: map[string]bool{}, releases: map[int64]int64{}}
}

func (n *notes) session(id int64, client string, p histories.Process) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.owners[id] = owner{client, p}
}

func (n *notes) granted(node string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.grants[node] = true
}

func (n *notes) releasing(session, token int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if token == 0 {
		delete(n.releases, session)
	} else {
		n.releases[session] = token
	}
}

// of says whose session id is.
func (n *notes) of(id int64) owner {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.owners[id]
}

// wasGranted says whether node was granted to its owner.
func (n *notes) wasGranted(node string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.grants[node]
}

// releasingToken is the token session id is releasing (0: none).
func (n *notes) releasingToken(id int64) int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.releases[id]
}
