package serverkit

import (
	"net"
	"sync"

	"github.com/locktest/locktest/internal/ports"
)

// Relay is a TCP listener in front of a server's peer port: the other
// servers are told its address instead of the server's own, so that all
// peer traffic to the server passes through it, and a cut between two
// servers can refuse their new connections and close their open ones. It
// keeps the open connections by the server that dialled them; what it
// does with a connection (learn the dialler, dial the server, copy) is the
// backend's handler.
type Relay struct {
	ln net.Listener

	mu     sync.Mutex
	conns  map[net.Conn]int // open connections (both legs), by dialler; Unknown while not known
	closed bool
	wg     sync.WaitGroup // the accept loop and the handlers
}

// Unknown is the dialler of a connection not yet told.
const Unknown = -1

// Listen opens a relay on a free loopback port; Serve starts it.
func Listen() (*Relay, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(ports.Host, "0"))
	if err != nil {
		return nil, err
	}
	return &Relay{ln: ln, conns: map[net.Conn]int{}}, nil
}

// Addr is the relay's address, "127.0.0.1:port".
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// Serve accepts connections until Close, each tracked (dialler Unknown)
// and handed to handle in a goroutine of its own; a connection is
// forgotten once handle returns.
func (r *Relay) Serve(handle func(net.Conn)) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			c, err := r.ln.Accept()
			if err != nil {
				return // closed
			}
			if !r.Track(c, Unknown) {
				c.Close()
				return
			}
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				defer r.Forget(c)
				handle(c)
			}()
		}
	}()
}

// Track records an open connection and who dialled it; false once the
// relay is closed (the caller then closes it).
func (r *Relay) Track(c net.Conn, from int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[c] = from
	return true
}

// Forget drops a connection that has been closed.
func (r *Relay) Forget(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
}

// Closed reports whether Close has begun.
func (r *Relay) Closed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// CutFrom closes the connections that from dialled.
func (r *Relay) CutFrom(from int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c, f := range r.conns {
		if f == from {
			c.Close()
		}
	}
}

// Cut closes every open connection; new ones are still accepted.
func (r *Relay) Cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.conns {
		c.Close()
	}
}

// Close stops accepting, closes every connection and waits for the
// handlers.
func (r *Relay) Close() {
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.ln.Close()
	r.wg.Wait()
}

// Join copies a to b and b to a, with copy, until either direction ends,
// then closes both: peer protocols here never half-close.
func Join(a, b net.Conn, copy func(dst, src net.Conn)) {
	done := make(chan struct{}, 2)
	go func() { copy(b, a); done <- struct{}{} }()
	go func() { copy(a, b); done <- struct{}{} }()
	<-done
	a.Close()
	b.Close()
	<-done
}
