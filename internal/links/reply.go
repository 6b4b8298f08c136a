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

// framer reads what a server sends on one connection and reports whether
// an answer to a request was in it.
type framer interface{ ended(data []byte) bool }

// NewState is a connection's framing state, for the link's protocol.
func (t *replyToxic) NewState() any {
	if t.Proto == "zk" {
		return &zkFrames{}
	}
	return &h2Frames{}
}

func (t *replyToxic) Pipe(stub *toxics.ToxicStub) {
	v, _ := watched.Load(t.Tag)
	a, _ := v.(*Answers)
	st, _ := stub.State.(framer)
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

// h2Frames reads the HTTP/2 frames a server sends on one connection,
// from the first byte the toxic saw: toxiproxy starts a new toxic between
// two reads of the connection, which on loopback end where the server's
// writes (whole frames) end. A frame that cannot be one (an unknown
// type, a length beyond the default maximum) means it began inside a
// frame: the connection then tells nothing.
type h2Frames struct {
	buf    []byte // a frame header not yet whole
	skip   int    // payload bytes of the current frame still to come
	broken bool
}

// ended reads data and reports whether a stream ended in it: a HEADERS
// or DATA frame with END_STREAM, or an RST_STREAM.
func (f *h2Frames) ended(data []byte) bool {
	end := false
	for len(data) > 0 && !f.broken {
		if f.skip > 0 {
			n := min(f.skip, len(data))
			f.skip -= n
			data = data[n:]
			continue
		}
		n := min(9-len(f.buf), len(data))
		f.buf = append(f.buf, data[:n]...)
		data = data[n:]
		if len(f.buf) < 9 {
			break
		}
		length := int(f.buf[0])<<16 | int(f.buf[1])<<8 | int(f.buf[2])
		typ, flags := f.buf[3], f.buf[4]
		reserved := binary.BigEndian.Uint32(f.buf[5:9]) >> 31
		f.buf = f.buf[:0]
		if typ > 9 || length > 1<<14 || reserved != 0 {
			f.broken = true
			break
		}
		f.skip = length
		const typData, typHeaders, typRST, endStream = 0x0, 0x1, 0x3, 0x1
		if (typ == typData || typ == typHeaders) && flags&endStream != 0 || typ == typRST {
			end = true
		}
	}
	return end
}

// zkFrames reads the frames a ZooKeeper server sends on one connection:
// each a 4-byte length, then the reply's header (its xid, zxid and error)
// and body. A request's reply carries the request's xid, which clients
// number from 1; a ping's reply is xid -2, a watch's event -1 (and the
// session's connect reply, at its start, no header: its first field, the
// protocol version, is 0). As for h2Frames, a length no reply has means
// the bytes began inside a frame, and the connection then tells nothing.
type zkFrames struct {
	buf    []byte // a length and xid not yet whole
	skip   int    // bytes of the current frame still to come
	broken bool
}

// ended reads data and reports whether a request's reply was in it.
func (f *zkFrames) ended(data []byte) bool {
	// A reply's header is 16 bytes; a frame beyond the servers' default
	// jute.maxbuffer (0xfffff) plus room is no reply.
	const header, most = 16, 1 << 21
	end := false
	for len(data) > 0 && !f.broken {
		if f.skip > 0 {
			n := min(f.skip, len(data))
			f.skip -= n
			data = data[n:]
			continue
		}
		n := min(8-len(f.buf), len(data))
		f.buf = append(f.buf, data[:n]...)
		data = data[n:]
		if len(f.buf) < 8 {
			break
		}
		length := int32(binary.BigEndian.Uint32(f.buf[:4]))
		xid := int32(binary.BigEndian.Uint32(f.buf[4:8]))
		f.buf = f.buf[:0]
		if length < header || length > most {
			f.broken = true
			break
		}
		f.skip = int(length) - 4
		if xid > 0 {
			end = true
		}
	}
	return end
}
