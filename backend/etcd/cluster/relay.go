package cluster

import (
	"io"
	"net"
	"sync"
	"time"
)

// relay is a plain TCP forwarder in front of a member's peer listener. The
// member advertises the relay's address as its peer URL, so all raft and
// peer-HTTP traffic to the member passes through it, and Close can cut every
// peer connection at once.
//
// Why: etcd's peer HTTP server wraps connections in a timeoutConn that
// re-arms the read deadline on every Read, which defeats net/http's abort of
// its background read after a request. Such a connection stays busy until
// rafthttp.ConnReadTimeout (5 s): a later request on it (e.g. the leader's
// periodic /version probe) hangs for up to 5 s — which HardStop then waits
// for — embed.Etcd.Close waits out its 1 s peer shutdown limit, and the
// connection's goroutines outlive Close. With the relay's connections closed
// first, every such read ends at once.
//
// In front of a process member, the relay also partitions: it tells which
// member dialled each connection (by the process that owns the socket) and
// drops connections from members cut from its own.
type relay struct {
	ln net.Listener

	// Set by filter before the relay is used.
	member int                     // the member behind the relay
	owner  func(net.Conn) int      // which member dialled a connection, -1 for none
	isCut  func(from, to int) bool // whether from is cut from to

	mu     sync.Mutex
	target string           // the member's real peer listen address
	conns  map[net.Conn]int // open connections, by the member that dialled them (-1: unknown)
	closed bool
	wg     sync.WaitGroup // serve loop and handlers
}

func newRelay() (*relay, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}
	r := &relay{ln: ln, conns: map[net.Conn]int{}}
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

func (r *relay) addr() string { return r.ln.Addr().String() }

// filter makes the relay in front of member drop connections from members
// cut from it.
func (r *relay) filter(member int, owner func(net.Conn) int, cut func(from, to int) bool) {
	r.member, r.owner, r.isCut = member, owner, cut
}

func (r *relay) setTarget(addr string) {
	r.mu.Lock()
	r.target = addr
	r.mu.Unlock()
}

func (r *relay) serve() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return // closed
		}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			c.Close()
			return
		}
		target := r.target
		r.conns[c] = -1
		r.wg.Add(1)
		r.mu.Unlock()
		go r.handle(c, target)
	}
}

func (r *relay) handle(c net.Conn, target string) {
	defer r.wg.Done()
	defer r.forget(c)
	from := -1
	if r.owner != nil {
		from = r.owner(c)
		if r.isCut(from, r.member) {
			c.Close()
			return
		}
	}
	if target == "" {
		c.Close()
		return
	}
	u, err := net.DialTimeout("tcp", target, time.Second)
	if err != nil {
		c.Close()
		return
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		c.Close()
		u.Close()
		return
	}
	r.conns[c], r.conns[u] = from, from
	r.mu.Unlock()
	defer r.forget(u)

	// Either direction ending closes both: peer traffic is HTTP, nothing
	// relies on half-closed connections.
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(u, c)
	go pipe(c, u)
	<-done
	c.Close()
	u.Close()
	<-done
}

func (r *relay) forget(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
}

// cut closes every current connection; new ones are still accepted.
func (r *relay) cut() {
	r.mu.Lock()
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
}

// cutFrom closes the connections member from dialled. A connection whose
// dialler was still being looked up is checked against the cuts then.
func (r *relay) cutFrom(from int) {
	r.mu.Lock()
	for c, f := range r.conns {
		if f == from {
			c.Close()
		}
	}
	r.mu.Unlock()
}

// close stops accepting, cuts every connection and waits for the handlers.
func (r *relay) close() {
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.ln.Close()
	r.wg.Wait()
}
