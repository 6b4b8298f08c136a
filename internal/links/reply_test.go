package links

import (
	"bytes"
	"encoding/binary"
	"testing"

	"golang.org/x/net/http2"
)

// The HTTP/2 reading of a lost reply's toxic: a server's PINGs, window
// updates and stream messages (a lease keep-alive's DATA) are no answer;
// the end of a stream (a unary reply's trailers, a reset) is, across
// reads that split its frames anywhere; bytes that began inside a frame
// tell nothing.
func TestH2FramesEnded(t *testing.T) {
	var b bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	frame := func(write func() error) []byte {
		t.Helper()
		b.Reset()
		if err := write(); err != nil {
			t.Fatal(err)
		}
		return bytes.Clone(b.Bytes())
	}
	ping := frame(func() error { return fr.WritePing(false, [8]byte{1}) })
	window := frame(func() error { return fr.WriteWindowUpdate(0, 100) })
	message := frame(func() error { return fr.WriteData(3, false, make([]byte, 40)) })
	trailers := frame(func() error {
		return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: []byte{0x88}, EndStream: true, EndHeaders: true})
	})
	reset := frame(func() error { return fr.WriteRSTStream(7, http2.ErrCodeCancel) })

	noAnswer := bytes.Join([][]byte{ping, window, message}, nil)
	f := h2Frames()
	if f.ended(noAnswer) {
		t.Error("a PING, a window update and a stream message read as an answer")
	}
	// Split anywhere, the trailers' frame header too: the end is read
	// once its header is whole.
	whole := append(bytes.Clone(noAnswer), trailers...)
	n := len(noAnswer)
	f = h2Frames()
	for _, cut := range [][2]int{{0, 5}, {5, n + 4}, {n + 4, n + 8}, {n + 8, len(whole)}} {
		if got := f.ended(whole[cut[0]:cut[1]]); got != (cut[1] == len(whole)) {
			t.Errorf("bytes %v: ended %v", cut, got)
		}
	}
	if !h2Frames().ended(reset) {
		t.Error("a reset read as no answer")
	}
	// Begun inside a frame: its payload read as a header is no frame.
	f = h2Frames()
	if f.ended(bytes.Repeat([]byte{0xff}, 9)) || !f.broken || f.ended(trailers) {
		t.Errorf("bytes from inside a frame: broken %v", f.broken)
	}
}

// The ZooKeeper reading of a lost reply's toxic: a ping's reply and a
// watch's event are no answer; a request's reply is, across reads that
// split its frame anywhere; bytes that began inside a frame tell nothing.
func TestZKFramesAnswered(t *testing.T) {
	frame := func(xid int32, body int) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(16+body))
		b = binary.BigEndian.AppendUint32(b, uint32(xid))
		b = binary.BigEndian.AppendUint64(b, 0x100000007) // zxid
		b = binary.BigEndian.AppendUint32(b, 0)           // err
		return append(b, make([]byte, body)...)
	}
	ping, event, reply := frame(-2, 0), frame(-1, 40), frame(12, 30)

	noAnswer := bytes.Join([][]byte{ping, event}, nil)
	if zkFrames().ended(noAnswer) {
		t.Error("a ping's reply and a watch's event read as an answer")
	}
	whole := append(bytes.Clone(noAnswer), reply...)
	n := len(noAnswer)
	f := zkFrames()
	for _, cut := range [][2]int{{0, 3}, {3, n + 2}, {n + 2, n + 6}, {n + 6, n + 8}, {n + 8, len(whole)}} {
		// The reply is read once its length and xid are whole.
		if got := f.ended(whole[cut[0]:cut[1]]); got != (cut[1] == n+8) {
			t.Errorf("bytes %v: ended %v", cut, got)
		}
	}
	// Begun inside a frame: its body read as a length is no frame.
	f = zkFrames()
	if f.ended(bytes.Repeat([]byte{0xff}, 8)) || !f.broken || f.ended(reply) {
		t.Errorf("bytes from inside a frame: broken %v", f.broken)
	}
}
