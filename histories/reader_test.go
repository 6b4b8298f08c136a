package histories

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func readAll(t *testing.T, text string) ([]Op, error) {
	t.Helper()
	return ReadAll(strings.NewReader(text), "h.jsonl")
}

func sampleOps() []Op {
	return []Op{
		{Type: Invoke, F: Acquire, Process: 0, Time: 10, Key: "a"},
		{Type: Invoke, F: "partition", Process: Nemesis, Time: 11, Value: &Value{Fault: "partition", Targets: []string{"n1", "n2"}, Params: map[string]string{"mode": "majority"}}},
		{Type: OK, F: Acquire, Process: 0, Time: 20, Key: "a", Value: TokenValue(41)},
		{Type: Invoke, F: Read, Process: 0, Time: 30, Key: "a"},
		{Type: OK, F: Read, Process: 0, Time: 40, Key: "a", Value: ReadValue(7)},
		{Type: Invoke, F: Write, Process: 0, Time: 50, Key: "a", Value: WriteValue(41, 8)},
		{Type: Info, F: Write, Process: 0, Time: 60, Key: "a", Value: WriteValue(41, 8), Error: "context deadline exceeded"},
		{Type: Info, F: "partition", Process: Nemesis, Time: 70},
		{Type: Invoke, F: Release, Process: 1, Time: 80},
	}
}

func TestRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	want := sampleOps()
	for i, op := range want {
		got, err := w.Write(op)
		if err != nil {
			t.Fatal(err)
		}
		if got.Index != i {
			t.Fatalf("op %d: index %d", i, got.Index)
		}
		want[i].Index = i
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), "\n"); n != len(want) {
		t.Fatalf("%d lines, want %d", n, len(want))
	}
	got, err := readAll(t, buf.String())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
	}
}

func TestReadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range sampleOps() {
		if _, err := w.Write(op); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(Op{Type: Invoke, F: Read}); err == nil {
		t.Fatal("write after Close succeeded")
	}
	ops, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != len(sampleOps()) || ops[8].Index != 8 || ops[2].Value == nil || *ops[2].Value.Token != 41 {
		t.Fatalf("ReadFile: %+v", ops)
	}
	if _, err := ReadFile(filepath.Join(t.TempDir(), "missing.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestReaderLenient(t *testing.T) {
	// Blank lines are skipped, unknown fields ignored, missing index and
	// key filled in, nemesis ops unpaired, an invoke left open at the end
	// accepted.
	text := `
{"type":"invoke","f":"acquire","process":3,"time":5,"extra":{"x":1}}

{"type":"info","f":"kill","process":"nemesis","time":6,"value":{"fault":"kill","targets":["n1"]}}
{"index":77,"type":"ok","f":"acquire","process":3,"time":9,"value":{"token":12,"other":true}}
  {"type":"info","f":"kill","process":"nemesis","time":10}
{"type":"invoke","f":"release","process":3,"time":11}` + "\r\n"
	ops, err := readAll(t, text)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 5 {
		t.Fatalf("%d ops: %+v", len(ops), ops)
	}
	for i, want := range []int{0, 1, 77, 3, 4} {
		if ops[i].Index != want {
			t.Errorf("op %d: index %d, want %d", i, ops[i].Index, want)
		}
	}
	if ops[0].Key != "" || ops[1].Process != Nemesis || ops[1].Value.Fault != "kill" {
		t.Errorf("ops: %+v", ops)
	}
	if tok, ok := ops[2].Token(); !ok || tok != 12 {
		t.Errorf("token %d %v", tok, ok)
	}
}

func TestReaderErrors(t *testing.T) {
	const (
		inv = `{"type":"invoke","f":"acquire","process":1,"time":1}`
		ok  = `{"type":"ok","f":"acquire","process":1,"time":2,"value":{"token":5}}`
	)
	lines := func(ls ...string) string { return strings.Join(ls, "\n") + "\n" }
	for _, tc := range []struct {
		name, text, want string
	}{
		{"bad JSON", lines(inv, ok, `{"type":"invoke",`), `h.jsonl:3: bad JSON: `},
		{"not an object", lines(`[1,2]`), `h.jsonl:1: bad JSON: `},
		{"unknown type", lines(inv, "", `{"type":"okay","f":"acquire","process":1,"time":2}`), `h.jsonl:3: unknown type "okay"`},
		{"missing type", lines(`{"f":"acquire","process":1,"time":2}`), `h.jsonl:1: missing type`},
		{"missing f", lines(inv, ok, `{"type":"invoke","process":1,"time":3}`), `h.jsonl:3: missing f`},
		{"missing process", lines(`{"type":"invoke","f":"read","time":3}`), `h.jsonl:1: missing process`},
		{"bad process", lines(`{"type":"invoke","f":"read","process":-2,"time":3}`), `h.jsonl:1: bad process: `},
		{"missing time", lines(`{"type":"invoke","f":"read","process":1}`), `h.jsonl:1: missing time`},
		{"negative time", lines(inv, `{"type":"ok","f":"acquire","process":1,"time":-4}`), `h.jsonl:2: negative time -4`},
		{"unknown client f", lines(`{"type":"invoke","f":"cas","process":1,"time":3}`), `h.jsonl:1: unknown f "cas" for process 1`},
		{"completion without invoke", lines(inv, ok,
			`{"type":"invoke","f":"read","process":2,"time":3}`,
			`{"type":"ok","f":"read","process":2,"time":4}`,
			`{"type":"ok","f":"read","process":2,"time":5}`),
			`h.jsonl:5: ok for process 2 with no invoke in flight`},
		{"double invoke", lines(
			`{"type":"invoke","f":"acquire","process":0,"time":0}`,
			`{"type":"invoke","f":"write","process":1,"time":1}`,
			`{"type":"ok","f":"acquire","process":0,"time":2}`,
			`{"type":"invoke","f":"acquire","process":1,"time":3}`),
			`h.jsonl:4: process 1 invokes acquire while write is in flight (invoked at line 2)`},
		{"f mismatch", lines(inv, `{"type":"ok","f":"release","process":1,"time":2}`),
			`h.jsonl:2: completion f "release" does not match invoke f "acquire" of process 1 (invoked at line 1)`},
		{"key mismatch", lines(inv, `{"type":"fail","f":"acquire","process":1,"time":2,"key":"b"}`),
			`h.jsonl:2: completion key "b" does not match invoke key "" of process 1 (invoked at line 1)`},
		{"completion before invoke", lines(`{"type":"invoke","f":"read","process":1,"time":9}`, `{"type":"info","f":"read","process":1,"time":5}`),
			`h.jsonl:2: completion time 5 is before invoke time 9 of process 1 (invoked at line 1)`},
		{"nemesis unknown type", lines(`{"type":"start","f":"partition","process":"nemesis","time":1}`), `h.jsonl:1: unknown type "start"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readAll(t, tc.text)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T), want a *ParseError", err, err)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %q, want prefix %q", err, tc.want)
			}
		})
	}
}

func TestReaderErrorIsSticky(t *testing.T) {
	r := NewReader(strings.NewReader("{\n"+`{"type":"invoke","f":"read","process":1,"time":1}`+"\n"), "x")
	_, err1 := r.Next()
	_, err2 := r.Next()
	if err1 == nil || err1 != err2 {
		t.Fatalf("errors %v, %v", err1, err2)
	}
}

func TestReaderLongLines(t *testing.T) {
	// A 2 MiB line (a large error message) is fine...
	big := strings.Repeat("x", 2<<20)
	text := `{"type":"invoke","f":"read","process":1,"time":1}` + "\n" +
		`{"type":"fail","f":"read","process":1,"time":2,"error":"` + big + `"}` + "\n"
	ops, err := readAll(t, text)
	if err != nil || len(ops) != 2 || len(ops[1].Error) != len(big) {
		t.Fatalf("long line: %d ops, %v", len(ops), err)
	}
	// ...but a line beyond MaxLine is reported, not silently split.
	_, err = readAll(t, "\n"+strings.Repeat(" ", MaxLine+1)+"\n")
	if err == nil || !strings.HasPrefix(err.Error(), "h.jsonl:2: line longer than") {
		t.Fatalf("too long: %v", err)
	}
}

func TestReaderHandWritten(t *testing.T) {
	// Times far from zero, no indices, extra fields at every level, and
	// nemesis params holding numbers, booleans and null.
	text := `{"type":"invoke","f":"acquire","process":4,"time":1700000001000000000,"key":"lock","client":"c4","note":"x"}
{"type":"info","f":"key-deleted","process":"nemesis","time":1700000002000000000,"value":{"targets":["c4"],"params":{"key":"lock","lease":7587,"create_revision":38,"expired":true,"by":null},"why":"test"}}
{"type":"ok","f":"acquire","process":4,"time":1700000003000000000,"key":"lock","value":{"token":38,"extra":[1,2]}}
{"type":"info","f":"anything-goes","process":"nemesis","time":5}
`
	ops, err := readAll(t, text)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 4 || ops[0].Index != 0 || ops[3].Index != 3 || ops[0].Time != 1700000001000000000 {
		t.Fatalf("ops %+v", ops)
	}
	p := ops[1].Value.Params
	if p["key"] != "lock" || p["lease"] != "7587" || p["create_revision"] != "38" || p["expired"] != "true" || p["by"] != "" {
		t.Errorf("params %v", p)
	}
	// A params value that is an object is rejected, naming the line.
	_, err = readAll(t, `{"type":"invoke","f":"read","process":1,"time":1}`+"\n"+
		`{"type":"info","f":"start","process":"nemesis","time":2,"value":{"params":{"x":{"y":1}}}}`+"\n")
	if err == nil || !strings.HasPrefix(err.Error(), `h.jsonl:2: bad JSON: `) || !strings.Contains(err.Error(), `value of "x" must be a string or a number`) {
		t.Errorf("object param: %v", err)
	}
	// Params written back are strings.
	b, _ := MarshalLine(ops[1])
	if !strings.Contains(string(b), `"lease":"7587"`) {
		t.Errorf("marshal: %s", b)
	}
}

// A last line cut off mid-write (a killed run) is skipped and reported; a
// bad line anywhere else, or a bad last line that ends in a newline, is an
// error.
func TestReaderTornLastLine(t *testing.T) {
	good := `{"type":"invoke","f":"acquire","process":1,"time":1}` + "\n" + `{"type":"ok","f":"acquire","process":1,"time":2,"value":{"token":3}}` + "\n"
	r := NewReader(strings.NewReader(good+`{"type":"invoke","f":"rel`), "h.jsonl")
	n := 0
	for {
		_, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("torn last line: %v", err)
		}
		n++
	}
	if n != 2 || r.Torn() == nil || r.Torn().Error() != "h.jsonl:3: last line cut off (no newline, not valid JSON): skipped" {
		t.Fatalf("%d ops, torn %v", n, r.Torn())
	}
	for name, text := range map[string]string{
		"bad last line with newline": good + `{"type":"invoke","f":"rel` + "\n",
		"torn line in the middle":    `{"type":"invoke","f":"acq` + "\n" + good,
		"valid JSON, bad op, last":   good + `{"type":"bogus","f":"acquire","process":1,"time":3}`,
	} {
		if _, err := readAll(t, text); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The format's rules beyond a line's shape: what no history recorded by a
// lock can say is malformed, with the line that says it.
func TestReaderRules(t *testing.T) {
	const (
		inv  = `{"type":"invoke","f":"acquire","process":1,"time":1,"key":"lock"}`
		proc = `{"type":"info","f":"process","process":"nemesis","time":0,"value":{"targets":["c1"],"params":{"process":"1"}}}`
	)
	grant := func(value string) string {
		return `{"type":"ok","f":"acquire","process":1,"time":2,"key":"lock","value":` + value + `}`
	}
	deleted := func(params string) string {
		return `{"type":"info","f":"key-deleted","process":"nemesis","time":3,"key":"lock","value":{"targets":["c1"],"params":` + params + `}}`
	}
	lines := func(ls ...string) string { return strings.Join(ls, "\n") + "\n" }
	for _, tc := range []struct {
		name, text, want string
	}{
		{"repeated index", lines(`{"index":0,"type":"invoke","f":"read","process":1,"time":1}`, `{"index":0,"type":"ok","f":"read","process":1,"time":2}`),
			`h.jsonl:2: index 0 repeats an earlier record's`},
		{"an index given repeats a position", lines(`{"type":"invoke","f":"read","process":1,"time":1}`, `{"index":0,"type":"ok","f":"read","process":1,"time":2}`),
			`h.jsonl:2: index 0 repeats`},
		{"repeated out of order", lines(`{"index":7,"type":"invoke","f":"read","process":1,"time":1}`, `{"index":3,"type":"ok","f":"read","process":1,"time":2}`,
			`{"index":5,"type":"invoke","f":"read","process":2,"time":1}`, `{"index":7,"type":"ok","f":"read","process":2,"time":2}`),
			`h.jsonl:4: index 7 repeats`},
		{"negative index", lines(`{"index":-1,"type":"invoke","f":"read","process":1,"time":1}`), `h.jsonl:1: negative index -1`},
		{"decision below the token", lines(inv, grant(`{"token":10,"revision":9,"claim":"k"}`)), `h.jsonl:2: the grant's decision revision 9 is below its token 10`},
		{"negative decision", lines(inv, grant(`{"revision":-3}`)), `h.jsonl:2: negative decision revision -3`},
		{"deleted before created", lines(deleted(`{"key":"lock","create_revision":"8","revision":"8"}`)), `h.jsonl:1: key-deleted event: a key created at revision 8 cannot be deleted at revision 8`},
		{"negative revision", lines(deleted(`{"key":"lock","revision":-2}`)), `h.jsonl:1: key-deleted event: param revision must be a non-negative integer, got "-2"`},
		{"revision not a number", lines(deleted(`{"key":"lock","create_revision":"abc"}`)), `h.jsonl:1: key-deleted event: param create_revision must be a non-negative integer`},
		{"lease_alive", lines(deleted(`{"key":"lock","lease_alive":"yes"}`)), `h.jsonl:1: key-deleted event: param lease_alive must be true or false, got "yes"`},
		{"key-set without its set", lines(`{"type":"info","f":"key-set","process":"nemesis","time":9,"key":"lock","value":{"targets":["c1"],"params":{"key":"lock","process":"1","ttl_ms":"2000"}}}`),
			`h.jsonl:1: key-set event: it names the process whose grant it is, and the set_ns and ttl_ms of its key`},
		{"key-set asked after the set", lines(`{"type":"info","f":"key-set","process":"nemesis","time":9,"key":"lock","value":{"targets":["c1"],"params":{"key":"lock","process":"1","ttl_ms":"2000","set_ns":"5","asked_ns":"6"}}}`),
			`h.jsonl:1: key-set event: asked_ns 6 is after set_ns 5`},
		{"key-set changed before the set", lines(`{"type":"info","f":"key-set","process":"nemesis","time":9,"key":"lock","value":{"targets":["c1"],"params":{"key":"lock","process":"1","ttl_ms":"2000","set_ns":"5","changed_ns":"4"}}}`),
			`h.jsonl:1: key-set event: changed_ns 4 is before set_ns 5`},
		{"ttl", lines(`{"type":"info","f":"setup","process":"nemesis","time":0,"value":{"params":{"ttl":"2s"}}}`), `h.jsonl:1: setup event: param ttl must be a non-negative integer, got "2s"`},
		{"starved without its span", lines(`{"type":"info","f":"starved","process":"nemesis","time":9,"value":{"targets":["c1"],"params":{"process":"1","pid":"7","duration_ns":"5"}}}`),
			`h.jsonl:1: starved event: it names one client (targets) and how long its process waited to run`},
		{"starved for a negative time", lines(`{"type":"info","f":"starved","process":"nemesis","time":9,"value":{"targets":["c1"],"params":{"process":"1","pid":"7","duration_ns":"-5","span_ns":"9"}}}`),
			`h.jsonl:1: starved event: param duration_ns must be a non-negative integer, got "-5"`},
		{"process event without its number", lines(`{"type":"info","f":"process","process":"nemesis","time":0,"value":{"targets":["c1"]}}`), `h.jsonl:1: process event: it names one client`},
		{"process announced for another client", lines(proc, inv, `{"type":"info","f":"process","process":"nemesis","time":4,"value":{"targets":["c2"],"params":{"process":"1"}}}`),
			`h.jsonl:3: process 1 is announced for client c2, but line 1 announced it for c1: a process number belongs to one client`},
		{"process out of order", lines(inv, grant(`{"token":10}`), `{"type":"invoke","f":"release","process":1,"time":1,"key":"lock"}`),
			`h.jsonl:3: process 1 invokes release at time 1, before its previous operation completed at time 2`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readAll(t, tc.text)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want prefix %q", err, tc.want)
			}
		})
	}
	// What the rules allow: a process announced again for its own client,
	// indexes out of order but distinct, a grant decided on a later
	// revision, a deletion whose create revision the observer did not
	// know (0), params written as numbers.
	ok := lines(proc, `{"index":9,"type":"invoke","f":"acquire","process":1,"time":1,"key":"lock"}`,
		`{"index":4,"type":"ok","f":"acquire","process":1,"time":2,"key":"lock","value":{"token":10,"revision":12,"claim":"k"}}`,
		`{"index":5,"type":"info","f":"process","process":"nemesis","time":0,"value":{"targets":["c1"],"params":{"process":1}}}`,
		strings.Replace(deleted(`{"key":"lock","create_revision":0,"revision":14,"lease_alive":"false"}`), `{"type"`, `{"index":6,"type"`, 1))
	if _, err := readAll(t, ok); err != nil {
		t.Fatal(err)
	}
}

// A byte order mark, as some editors write, is not part of the history.
func TestReaderByteOrderMark(t *testing.T) {
	ops, err := readAll(t, "\ufeff"+`{"type":"invoke","f":"read","process":1,"time":1}`+"\n")
	if err != nil || len(ops) != 1 {
		t.Fatalf("ops %+v, %v", ops, err)
	}
}

// A process written with JSON escapes is the same process.
func TestReaderProcessEscaped(t *testing.T) {
	ops, err := readAll(t, `{"type":"info","f":"setup","process":"\u006eemesis","time":0}`+"\n")
	if err != nil || len(ops) != 1 || ops[0].Process != Nemesis {
		t.Fatalf("ops %+v, %v", ops, err)
	}
}
