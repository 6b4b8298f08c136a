package cluster

import (
	"io"
	"net"
	"sync"
	"time"

	"github.com/locktest/locktest/backend/serverkit"
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
	*serverkit.Relay

	// Set by filter before the relay is used.
	member int                     // the member behind the relay
	owner  func(net.Conn) int      // which member dialled a connection, -1 for none
	isCut  func(from, to int) bool // whether from is cut from to

	mu     sync.Mutex
	target string // the member's real peer listen address
}

func newRelay() (*relay, error) {
	sr, err := serverkit.Listen()
	if err != nil {
		return nil, err
	}
	r := &relay{Relay: sr}
	r.Serve(r.handle)
	return r, nil
}

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

func (r *relay) handle(c net.Conn) {
	defer c.Close()
	r.mu.Lock()
	target := r.target
	r.mu.Unlock()
	from := serverkit.Unknown
	if r.owner != nil {
		from = r.owner(c)
		if r.isCut(from, r.member) {
			return
		}
	}
	if target == "" {
		return
	}
	u, err := net.DialTimeout("tcp", target, time.Second)
	if err != nil {
		return
	}
	defer u.Close()
	if !r.Track(c, from) || !r.Track(u, from) {
		return
	}
	defer r.Forget(u)
	// Peer traffic is HTTP, nothing relies on half-closed connections.
	serverkit.Join(c, u, func(dst, src net.Conn) { io.Copy(dst, src) })
}
