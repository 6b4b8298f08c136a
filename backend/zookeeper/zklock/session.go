package zklock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locktest/locktest/clock"
	"github.com/locktest/locktest/lock"
)

// Client is what a ZooKeeper recipe gets as lock.Env.Conn: how to open
// sessions to the ensemble over the client's own links. A session is
// ZooKeeper's lease: a lock's node is ephemeral and goes with the session
// that created it.
type Client struct {
	// Servers are the host:port addresses of the client's links to the
	// servers, in the order its sessions try them.
	Servers []string
	// Clock is the client's clock: a session disconnected for its
	// timeout on it is taken as lost (see Session.Done).
	Clock *clock.Clock
	// Paused, if set, blocks while the client is paused (a stop-the-world
	// pause), or until ctx ends: a session's connections pass no byte
	// meanwhile, as a SIGSTOPped process's would, so its pings stop and
	// the servers expire it.
	Paused func(ctx context.Context) error
}

// Env returns the Client of env, or an error if env is another backend's.
func Env(env lock.Env) (*Client, error) {
	c, ok := env.Conn.(*Client)
	if !ok {
		return nil, fmt.Errorf("zklock: a ZooKeeper recipe needs a *zklock.Client, got %T (backend %q)", env.Conn, env.Backend)
	}
	return c, nil
}

// Session is one ZooKeeper session of a client, over go-zookeeper: its
// Conn, and whether it is lost. go-zookeeper hides an expiry (it opens a
// new session on the same Conn), so a Session watches the Conn's states
// and is lost for good once its first session ends (see Done); it then
// closes the Conn.
type Session struct {
	// Conn is the session's connection. Use it for this session only:
	// once Done is closed, its requests fail.
	Conn *zk.Conn

	id      int64
	timeout time.Duration
	clock   *clock.Clock
	paused  func(ctx context.Context) error
	ctx     context.Context // ends with the session: the pause waits end
	cancel  context.CancelFunc
	conns   *conns
	// zc is Conn for the event callback, which may run before Connect has
	// set Conn.
	zc atomic.Pointer[zk.Conn]

	mu     sync.Mutex
	gone   chan struct{} // closed once lost
	why    error
	offAt  time.Time // client clock: when the connection was lost; zero while connected
	closed bool
}

// ErrSessionLost wraps why a session is lost.
var ErrSessionLost = errors.New("zklock: the session is lost")

// Connect opens a session through c's links that asks for timeout (a
// run's TTL; locktest's servers grant from 2 ticks to a minute as asked),
// and returns once the servers granted it, or ctx ends.
func (c *Client) Connect(ctx context.Context, timeout time.Duration) (*Session, error) {
	if len(c.Servers) == 0 {
		return nil, errors.New("zklock: no servers")
	}
	s := &Session{timeout: timeout, clock: c.Clock, paused: c.Paused, gone: make(chan struct{}), conns: &conns{}}
	if s.clock == nil {
		s.clock = clock.New()
	}
	if s.paused == nil {
		s.paused = func(ctx context.Context) error { return ctx.Err() }
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	// go-zookeeper's options can only be passed inline (their type is
	// unexported). Its event channel holds 6 events and drops the rest:
	// the callback sees them all.
	zc, _, err := zk.Connect(c.Servers, timeout,
		zk.WithLogger(quiet{}),
		zk.WithEventCallback(s.event),
		zk.WithHostProvider(newOrdered(c.Servers)),
		zk.WithDialer(s.dial))
	if err != nil {
		s.cancel()
		return nil, fmt.Errorf("zklock: %w", err)
	}
	s.Conn = zc
	s.zc.Store(zc)
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		s.mu.Lock()
		id := s.id
		s.mu.Unlock()
		if id != 0 {
			return s, nil
		}
		select {
		case <-ctx.Done():
			s.Close()
			return nil, fmt.Errorf("zklock: a session through %v: %w", c.Servers, ctx.Err())
		case <-s.Done():
			s.Close()
			return nil, fmt.Errorf("zklock: a session through %v: %w", c.Servers, s.Err())
		case <-t.C:
		}
	}
}

// SessionID is the session's id, as the servers' logs name it.
func (s *Session) SessionID() int64 { return s.id }

// Timeout is the session timeout it asked for.
func (s *Session) Timeout() time.Duration { return s.timeout }

// Done is closed once the session is lost: the servers said it expired,
// go-zookeeper opened another in its place, or it was disconnected for
// its timeout on the client's clock (by then the servers have expired it,
// as Curator assumes), or it was closed or orphaned.
func (s *Session) Done() <-chan struct{} { return s.gone }

// Err says why the session is lost, wrapping ErrSessionLost; nil while it
// is not.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.why
}

// lose marks the session lost, once. Where the servers ended it (end
// is set), it closes the Conn too: left open, go-zookeeper would open a
// new session that nothing watches. A session taken as lost on the
// client's clock may still live on the servers: its Conn stays open, so
// that its node is not deleted under its holder by a close (the holder
// learns of the loss by Done, and releases as usual).
func (s *Session) lose(why string, end bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.why != nil {
		return
	}
	s.why = fmt.Errorf("%w: %s", ErrSessionLost, why)
	close(s.gone)
	if zc := s.zc.Load(); end && zc != nil && !s.closed {
		s.closed = true
		go zc.Close()
	}
}

// event follows the Conn's states. It runs on go-zookeeper's goroutine:
// it must not block.
func (s *Session) event(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	switch ev.State {
	case zk.StateHasSession:
		zc := s.zc.Load()
		for zc == nil { // Connect is about to set it
			time.Sleep(time.Millisecond)
			zc = s.zc.Load()
		}
		id := zc.SessionID()
		s.mu.Lock()
		first := s.id == 0
		if first {
			s.id = id
		}
		same := s.id == id
		s.offAt = time.Time{}
		s.mu.Unlock()
		if !first && !same {
			s.lose("go-zookeeper opened another session in its place", true)
		}
	case zk.StateExpired:
		s.lose("the servers expired it", true)
	case zk.StateDisconnected, zk.StateConnecting:
		s.mu.Lock()
		start := s.id != 0 && s.offAt.IsZero()
		if start {
			s.offAt = s.clock.Now()
		}
		off := s.offAt
		s.mu.Unlock()
		if start {
			go s.watchOff(off)
		}
	}
}

// watchOff loses the session if it stays disconnected for its timeout on
// the client's clock from off.
func (s *Session) watchOff(off time.Time) {
	for {
		t := s.clock.NewTimer(s.clock.Until(off.Add(s.timeout)))
		select {
		case <-t.C:
		case <-s.gone:
			t.Stop()
			return
		}
		if s.paused(s.ctx) != nil {
			return
		}
		s.mu.Lock()
		still := s.offAt.Equal(off)
		s.mu.Unlock()
		if !still {
			return
		}
		if s.clock.Now().Before(off.Add(s.timeout)) {
			continue // the clock was set back meanwhile
		}
		s.lose(fmt.Sprintf("disconnected for its timeout (%v) on the client's clock", s.timeout), false)
		return
	}
}

// Close ends the session: the servers delete its ephemeral nodes at once
// (a closeSession its client asked for).
func (s *Session) Close() error {
	s.mu.Lock()
	zc := s.zc.Load()
	closing := !s.closed && zc != nil
	s.closed = true
	if s.why == nil {
		s.why = fmt.Errorf("%w: closed", ErrSessionLost)
		close(s.gone)
	}
	s.mu.Unlock()
	if closing {
		zc.Close()
	}
	s.cancel()
	return nil
}

// Orphan drops the session without ending it, as a crashed process
// would: its connections are cut and no new one is made, so its
// closeSession never reaches the servers, which expire it after its
// timeout.
func (s *Session) Orphan() {
	s.conns.orphan()
	s.Close()
}

// dial dials a server for the session's Conn. Its connections pass no
// byte while the client is paused, none once the session is orphaned, and
// every read deadline go-zookeeper sets is capped at 2/3 of the session
// timeout: after connecting, go-zookeeper waits 10 times that for a
// server's answer to its connect request, and a SIGSTOPped server's
// kernel accepts connections it never answers, so the client would sit on
// it (13 s for a 2 s session, measured) well past its session's expiry
// instead of trying the next server (1.35 s with the cap).
func (s *Session) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	if s.conns.isOrphaned() {
		return nil, errOrphaned
	}
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	pc := &sessionConn{Conn: c, s: s, limit: s.timeout * 2 / 3}
	if !s.conns.add(pc) {
		c.Close()
		return nil, errOrphaned
	}
	return pc, nil
}

var errOrphaned = errors.New("zklock: the session is orphaned")

// conns are a session's connections, for Orphan.
type conns struct {
	mu       sync.Mutex
	all      []net.Conn
	orphaned atomic.Bool
}

func (cs *conns) add(c net.Conn) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.orphaned.Load() {
		return false
	}
	cs.all = append(cs.all, c)
	return true
}

func (cs *conns) isOrphaned() bool { return cs.orphaned.Load() }

func (cs *conns) orphan() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.orphaned.Store(true)
	for _, c := range cs.all {
		c.Close()
	}
	cs.all = nil
}

// sessionConn is one of a session's connections (see Session.dial).
type sessionConn struct {
	net.Conn
	s     *Session
	limit time.Duration
}

func (c *sessionConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	// What arrived during a pause is taken in after it.
	if perr := c.s.paused(c.s.ctx); perr != nil && err == nil {
		err = perr
	}
	if c.s.conns.isOrphaned() {
		return 0, errOrphaned
	}
	return n, err
}

func (c *sessionConn) Write(b []byte) (int, error) {
	if err := c.s.paused(c.s.ctx); err != nil {
		return 0, err
	}
	if c.s.conns.isOrphaned() {
		return 0, errOrphaned
	}
	return c.Conn.Write(b)
}

func (c *sessionConn) SetReadDeadline(t time.Time) error {
	if max := time.Now().Add(c.limit); !t.IsZero() && t.After(max) {
		t = max
	}
	return c.Conn.SetReadDeadline(t)
}

// quiet drops go-zookeeper's log lines ("connected to ...", "recv loop
// terminated ..."), which its default logger writes to stderr.
type quiet struct{}

func (quiet) Printf(string, ...any) {}

// ordered is a zk.HostProvider that tries the servers in the order given:
// go-zookeeper's own shuffles them with math/rand's global source, which no
// seed reaches (and zk.Connect shuffles the list before Init; ordered puts
// it back). Its retries are the default one's: after a pass over every
// server, go-zookeeper waits a second.
type ordered struct {
	mu         sync.Mutex
	rank       map[string]int
	servers    []string
	curr, last int
}

func newOrdered(addrs []string) *ordered {
	o := &ordered{rank: map[string]int{}}
	for i, a := range addrs {
		o.rank[a] = i
	}
	return o
}

func (o *ordered) Init(servers []string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.servers = make([]string, len(servers))
	for _, s := range servers {
		i, ok := o.rank[s]
		if !ok || i >= len(servers) {
			return fmt.Errorf("zklock: server %s not in the order given", s)
		}
		o.servers[i] = s
	}
	o.curr, o.last = -1, -1
	return nil
}

func (o *ordered) Len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.servers)
}

func (o *ordered) Next() (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.curr = (o.curr + 1) % len(o.servers)
	retryStart := o.curr == o.last
	if o.last == -1 {
		o.last = 0
	}
	return o.servers[o.curr], retryStart
}

func (o *ordered) Connected() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.last = o.curr
}
