package histories

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"regexp"
	"testing"

	"github.com/locktest/locktest/internal/fuzzseed"
)

// seedLines returns up to max distinct lines of each seed history.
func seedLines(t testing.TB, max int) [][]byte {
	seen := map[string]bool{}
	var out [][]byte
	for _, b := range fuzzseed.Histories(t, "..") {
		n := 0
		for line := range bytes.Lines(b) {
			line = bytes.TrimSpace(line)
			if n == max || seen[string(line)] {
				continue
			}
			seen[string(line)] = true
			out = append(out, line)
			n++
		}
	}
	return out
}

// FuzzDecode holds the fast decoder to encoding/json's reading of every
// line it decodes itself.
func FuzzDecode(f *testing.F) {
	for _, l := range seedLines(f, 150) {
		f.Add(l)
	}
	for _, s := range []string{
		`{"type":"ok","TYPE":"info","f":"read","process":1,"time":2}`,
		`{"type":"info","f":"start","process":"\u006eemesis","time":1,"value":{"params":{"a":1.5e3,"b":null,"c":true}}}`,
		`{"type":"ok","f":"acquire","process":1,"time":2,"value":{"token":1,"token":2}}`,
		`{"index":1.0,"type":"ok","f":"read","process":1,"time":2}`,
		`{"type":"ok","f":"read","process":1,"time":2,"value":null}`,
		`{"type":"ok","f":"read","process":1,"time":2,"x":[1,{"y":[]}],"value":{"targets":[]}} `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var d decoder
		fast, ok := d.decode(b)
		slow, reason := decodeSlow(b)
		if !ok {
			return
		}
		if reason != "" {
			t.Fatalf("fast decoder accepted %q; encoding/json: %s", b, reason)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q:\nfast %+v %+v\nslow %+v %+v", b, fast, fast.value, slow, slow.value)
		}
	})
}

var lineError = regexp.MustCompile(`^h\.jsonl:[0-9]+: [^\n]+$`)

// FuzzReader reads any input: a history, or a clear one-line error naming
// the file and line; and what it reads, written again, reads the same.
func FuzzReader(f *testing.F) {
	for _, b := range fuzzseed.Histories(f, "..") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var ops []Op
		r := NewReader(bytes.NewReader(b), "h.jsonl")
		for {
			op, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				var pe *ParseError
				if !errors.As(err, &pe) || !lineError.MatchString(err.Error()) || pe.Line < 1 || pe.Line > bytes.Count(b, []byte("\n"))+1 {
					t.Fatalf("error %q (%T): want one line naming h.jsonl and a line of the input", err, err)
				}
				return
			}
			ops = append(ops, op)
		}
		var buf bytes.Buffer
		for _, op := range ops {
			line, err := MarshalLine(op)
			if err != nil {
				t.Fatalf("marshal %+v: %v", op, err)
			}
			buf.Write(append(line, '\n'))
		}
		again, err := readAll(t, buf.String())
		if err != nil {
			t.Fatalf("what was read does not read again: %v\n%s", err, buf.String())
		}
		if !reflect.DeepEqual(normalize(again), normalize(ops)) {
			t.Fatalf("read again differently:\n%+v\n%+v", again, ops)
		}
	})
}

// normalize keeps what a written line says: an empty list of targets or
// params is not written.
func normalize(ops []Op) []Op {
	out := make([]Op, len(ops))
	for i, op := range ops {
		if v := op.Value; v != nil {
			c := *v
			if len(c.Targets) == 0 {
				c.Targets = nil
			}
			if len(c.Params) == 0 {
				c.Params = nil
			}
			op.Value = &c
		}
		out[i] = op
	}
	return out
}
