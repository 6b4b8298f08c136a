package links

import (
	"bytes"
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
	f := &h2Frames{}
	if f.ended(noAnswer) {
		t.Error("a PING, a window update and a stream message read as an answer")
	}
	// Split anywhere, the trailers' frame header too: the end is read
	// once its header is whole.
	whole := append(bytes.Clone(noAnswer), trailers...)
	n := len(noAnswer)
	f = &h2Frames{}
	for _, cut := range [][2]int{{0, 5}, {5, n + 4}, {n + 4, n + 8}, {n + 8, len(whole)}} {
		if got := f.ended(whole[cut[0]:cut[1]]); got != (cut[1] == len(whole)) {
			t.Errorf("bytes %v: ended %v", cut, got)
		}
	}
	if !(&h2Frames{}).ended(reset) {
		t.Error("a reset read as no answer")
	}
	// Begun inside a frame: its payload read as a header is no frame.
	f = &h2Frames{}
	if f.ended(bytes.Repeat([]byte{0xff}, 9)) || !f.broken || f.ended(trailers) {
		t.Errorf("bytes from inside a frame: broken %v", f.broken)
	}
}
