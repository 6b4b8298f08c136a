package links

import (
	"encoding/binary"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/Shopify/toxiproxy/v2/toxics"
)

// ReplyToxic is the type of a toxic that drops what it carries, as a
// timeout toxic of timeout 0 does (removing it closes its connections: a
// cut), and tells whether the server answered since it went on: a lost
// reply cuts only once the server has answered the request whose reply it
// holds, so that the request was applied (or refused) and not dropped with
// its connection. Only the in-process toxiproxy (Start) knows the type; a
// toxiproxy-server someone runs refuses it.
//
// Attributes: tag, from Watch; proto "h2" for links that carry HTTP/2
// (gRPC: etcd), where an answer is the end of a stream (a unary reply's
// trailers, or a reset) and not the PINGs and stream messages (lease
// keep-alives, watch events) the server sends meanwhile; "zk" for
// ZooKeeper's client protocol, where an answer is a reply to a request
// (its xid positive) and not a ping's reply or a watch's event; "" for
// links that carry one request's reply at a time, where any byte is an
// answer.
const ReplyToxic = "locktest-reply"

func init() { toxics.Register(ReplyToxic, new(replyToxic)) }

// Answers tells whether a ReplyToxic of its tag saw an answer.
type Answers struct {
	tag  string
	once sync.Once
	ch   chan struct{}
}

var (
	watched sync.Map // tag -> *Answers
	tags    atomic.Int64
)

// Watch registers a new tag for ReplyToxic's attribute; Close unregisters
// it.
func Watch() *Answers {
	a := &Answers{tag: "reply-" + strconv.FormatInt(tags.Add(1), 10), ch: make(chan struct{})}
	watched.Store(a.tag, a)
	return a
}

// Tag is the toxic's attribute tag.
func (a *Answers) Tag() string { return a.tag }

// Answered is closed once a toxic of the tag saw an answer.
func (a *Answers) Answered() <-chan struct{} { return a.ch }

// Close unregisters the tag.
func (a *Answers) Close() { watched.Delete(a.tag) }

func (a *Answers) answer() { a.once.Do(func() { close(a.ch) }) }

type replyToxic struct {
	Tag   string `json:"tag"`
	Proto string `json:"proto"`
}

// NewState is a connection's framing state, for the link's protocol.
func (t *replyToxic) NewState() any {
	if t.Proto == "zk" {
		return zkFrames()
	}
	return h2Frames()
}

func (t *replyToxic) Pipe(stub *toxics.ToxicStub) {
	v, _ := watched.Load(t.Tag)
	a, _ := v.(*Answers)
	st, _ := stub.State.(*frames)
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			// Dropped; read only to tell an answer.
			if a != nil && (t.Proto == "" || st != nil && st.ended(c.Data)) {
				a.answer()
			}
		}
	}
}

func (t *replyToxic) Cleanup(stub *toxics.ToxicStub) { stub.Close() }

// frames reads the frames a server sends on one connection, from the
// first byte the toxic saw: toxiproxy starts a new toxic between two
// reads of the connection, which on loopback end where the server's
// writes (whole frames) end. A header that cannot be one (an unknown
// type, a length no frame has) means it began inside a frame: the
// connection then tells nothing.
type frames struct {
	size int // a header's bytes
	// header reads a whole header: the bytes of its frame still to
	// come, whether the frame answers a request, and whether it can be
	// a header at all.
	header func(h []byte) (rest int, answer, ok bool)
	buf    []byte // a header not yet whole
	skip   int    // bytes of the current frame still to come
	broken bool
}

// ended reads data and reports whether an answer was in it.
func (f *frames) ended(data []byte) bool {
	end := false
	for len(data) > 0 && !f.broken {
		if f.skip > 0 {
			n := min(f.skip, len(data))
			f.skip -= n
			data = data[n:]
			continue
		}
		n := min(f.size-len(f.buf), len(data))
		f.buf = append(f.buf, data[:n]...)
		data = data[n:]
		if len(f.buf) < f.size {
			break
		}
		rest, answer, ok := f.header(f.buf)
		f.buf = f.buf[:0]
		if !ok {
			f.broken = true
			break
		}
		f.skip, end = rest, end || answer
	}
	return end
}

// h2Frames reads HTTP/2 (gRPC: etcd's links), where an answer is the end
// of a stream: a HEADERS or DATA frame with END_STREAM, or an RST_STREAM.
func h2Frames() *frames {
	return &frames{size: 9, header: func(h []byte) (int, bool, bool) {
		length := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		typ, flags := h[3], h[4]
		reserved := binary.BigEndian.Uint32(h[5:9]) >> 31
		if typ > 9 || length > 1<<14 || reserved != 0 {
			return 0, false, false
		}
		const typData, typHeaders, typRST, endStream = 0x0, 0x1, 0x3, 0x1
		return length, (typ == typData || typ == typHeaders) && flags&endStream != 0 || typ == typRST, true
	}}
}

// zkFrames reads ZooKeeper's client protocol: each frame a 4-byte length,
// then the reply's header (its xid, zxid and error) and body. A request's
// reply carries the request's xid, which clients number from 1; a ping's
// reply is xid -2, a watch's event -1 (and the session's connect reply,
// at its start, no header: its first field, the protocol version, is 0).
func zkFrames() *frames {
	// A reply's header is 16 bytes; a frame beyond the servers' default
	// jute.maxbuffer (0xfffff) plus room is no reply.
	const header, most = 16, 1 << 21
	return &frames{size: 8, header: func(h []byte) (int, bool, bool) {
		length := int32(binary.BigEndian.Uint32(h[:4]))
		xid := int32(binary.BigEndian.Uint32(h[4:8]))
		if length < header || length > most {
			return 0, false, false
		}
		return int(length) - 4, xid > 0, true
	}}
}
