package zkserver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/locktest/locktest/backend/serverkit"
)

// A relay is a plain TCP forwarder in front of one server's quorum port or
// election port. Every other server's zoo.cfg names the relay as that
// server's address, so all peer traffic to the server passes through it.
//
// The relay learns which server dialled from the first bytes ZooKeeper
// sends on a peer connection (its server id), so a cut between two servers
// refuses their new connections and closes the open ones, without looking
// at socket owners in /proc:
//
//   - election port (QuorumCnxManager.startConnection): int64 protocol
//     version (-65536, or -65535 with multiAddress), int64 sid, int32
//     length, the dialler's own election address; a non-negative first
//     int64 is the 3.4 form, the sid alone.
//   - quorum port (Learner.registerWithLeader): a jute QuorumPacket,
//     int32 type (11 FOLLOWERINFO, 16 OBSERVERINFO), int64 zxid, int32
//     data length, then LearnerInfo, whose first field is the int64 sid.
//
// The election header is rewritten to the 3.4 form (the sid alone). Why: a
// server receiving a connection from a lower sid closes it and dials back
// (only the higher sid keeps a connection), and with the 3.5+ header it
// dials the address in that header: the dialler's own, real election
// address, which would bypass the relay. Without an address it dials the
// address in its own zoo.cfg: the relay.
type relay struct {
	*serverkit.Relay // its connections are kept by dialler sid
	kind             portKind
	server           int    // sid of the server behind the relay
	target           string // the server's real address
	cut              func(from, to int) CutMode
}

type portKind int

const (
	quorumPort portKind = iota
	electionPort
)

func (k portKind) String() string {
	if k == quorumPort {
		return "quorum"
	}
	return "election"
}

// headerTimeout bounds the wait for a dialler's first bytes.
const headerTimeout = 5 * time.Second

func newRelay(kind portKind, server int, target string, cut func(from, to int) CutMode) (*relay, error) {
	sr, err := serverkit.Listen()
	if err != nil {
		return nil, err
	}
	r := &relay{Relay: sr, kind: kind, server: server, target: target, cut: cut}
	r.Serve(r.handle)
	return r, nil
}

func (r *relay) handle(c net.Conn) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(headerTimeout))
	from, header, err := readHeader(r.kind, c)
	c.SetReadDeadline(time.Time{})
	if err != nil || !r.Track(c, from) {
		return
	}
	switch r.cut(from, r.server) {
	case CutClose:
		return
	case CutDrop:
		// Accepted and silent, as a peer behind a lossy link: the dialler
		// times out; the heal closes it.
		io.Copy(io.Discard, c)
		return
	}
	u, err := r.dialTarget(from)
	if err != nil {
		return
	}
	defer u.Close()
	// Tag the server's leg too, then re-check the cut: a cut that came in
	// between closed nothing of ours yet.
	if !r.Track(u, from) {
		return
	}
	defer r.Forget(u)
	if r.cut(from, r.server) == CutClose {
		return
	}
	if _, err := u.Write(header); err != nil {
		return
	}
	serverkit.Join(c, u, func(dst, src net.Conn) { r.pipe(dst, src, from) })
}

// upstreamPatience is how long a relay keeps retrying a server that
// refuses connections (not started yet, or just elected and not yet
// listening on its quorum port). Without a relay the dialler's connect is
// refused and ZooKeeper retries it (a learner 5 times, 100 ms apart); behind
// a relay the connect has already succeeded, so a relay that gave up at
// once would close a connection the dialler has written to: the learner
// then abandons its leader and the ensemble starts another election round
// (its notification timeouts doubling: 2.8 s to a leader instead of 0.4 s).
const upstreamPatience = 2 * time.Second

func (r *relay) dialTarget(from int) (net.Conn, error) {
	deadline := time.Now().Add(upstreamPatience)
	for {
		u, err := net.DialTimeout("tcp", r.target, time.Second)
		if err == nil || time.Now().After(deadline) || r.Closed() || r.cut(from, r.server) != NoCut {
			return u, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pipe copies src to dst, dropping what arrives while the pair is cut
// with CutDrop.
func (r *relay) pipe(dst, src net.Conn, from int) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && r.cut(from, r.server) != CutDrop {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// readHeader reads a peer connection's first bytes and returns the
// dialler's sid and the bytes to send on to the server.
func readHeader(kind portKind, c io.Reader) (int, []byte, error) {
	switch kind {
	case electionPort:
		var b [8]byte
		if _, err := io.ReadFull(c, b[:]); err != nil {
			return 0, nil, err
		}
		v := int64(binary.BigEndian.Uint64(b[:]))
		if v >= 0 { // 3.4 form: the sid alone
			return int(v), b[:], nil
		}
		var h [12]byte // sid, address length
		if _, err := io.ReadFull(c, h[:]); err != nil {
			return 0, nil, err
		}
		sid := int64(binary.BigEndian.Uint64(h[:8]))
		n := int32(binary.BigEndian.Uint32(h[8:]))
		if n < 0 || n > 4096 {
			return 0, nil, fmt.Errorf("election header: address length %d", n)
		}
		if _, err := io.CopyN(io.Discard, c, int64(n)); err != nil {
			return 0, nil, err
		}
		out := binary.BigEndian.AppendUint64(nil, uint64(sid))
		return int(sid), out, nil
	default:
		var b [24]byte
		if _, err := io.ReadFull(c, b[:]); err != nil {
			return 0, nil, err
		}
		typ := int32(binary.BigEndian.Uint32(b[:4]))
		n := int32(binary.BigEndian.Uint32(b[12:16]))
		if (typ != 11 && typ != 16) || n < 8 {
			return 0, nil, errors.New("quorum header: not FOLLOWERINFO or OBSERVERINFO")
		}
		return int(binary.BigEndian.Uint64(b[16:24])), b[:], nil
	}
}
