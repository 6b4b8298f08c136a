package histories

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// MaxLine is the longest line the Reader accepts, in bytes.
const MaxLine = 16 << 20

// ParseError reports a malformed line. Its message has the form
// "name:line: reason", with 1-based line numbers.
type ParseError struct {
	Name   string
	Line   int
	Reason string
}

func (e *ParseError) Error() string { return fmt.Sprintf("%s:%d: %s", e.Name, e.Line, e.Reason) }

// Reader reads a history one operation at a time, so that large histories
// need not be held in memory. It validates each line, and the pairing of
// client invocations and completions: a completion (ok, fail or info) must
// follow an invoke of the same process, f and key, and a process has at most
// one operation in flight. Nemesis operations are only checked to be well
// formed, with any f. An invoke left without completion at the end is not an
// error: it counts as info.
//
// Hand-written histories are welcome: times need not start at zero (only be
// non-negative), index may be absent (the position is used), unknown fields
// are ignored at every level, and nemesis params may hold numbers. Every
// rejection is a *ParseError naming the file, the line and the reason.
type Reader struct {
	s        *bufio.Scanner
	name     string
	line     int // lines consumed
	n        int // operations returned
	inflight map[Process]pending
	err      error // sticky
	// unended is set when the line just scanned had no newline: the file's
	// last line. torn is that line, if it was also not valid JSON.
	unended bool
	torn    *ParseError
}

// pending is a client invocation awaiting its completion.
type pending struct {
	f, key string
	time   int64
	line   int
}

// NewReader returns a Reader of r; name is used in error messages.
func NewReader(r io.Reader, name string) *Reader {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 64<<10), MaxLine)
	rd := &Reader{s: s, name: name, inflight: map[Process]pending{}}
	s.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		adv, tok, err := bufio.ScanLines(data, atEOF)
		rd.unended = tok != nil && atEOF && bytes.IndexByte(data[:adv], '\n') < 0
		return adv, tok, err
	})
	return rd
}

// Torn returns the history's last line if it was cut off (no newline at
// its end and not valid JSON: a run killed mid-write), which the Reader
// skipped, or nil.
func (r *Reader) Torn() *ParseError { return r.torn }

// ReadFile reads and validates the whole history at path.
func ReadFile(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ops []Op
	r := NewReader(f, path)
	for {
		op, err := r.Next()
		if err == io.EOF {
			return ops, nil
		}
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
}

// Next returns the next operation, or io.EOF at the end. Blank lines are
// skipped. An op without index gets its position (0-based, blank lines not
// counted). After an error, Next keeps returning it.
func (r *Reader) Next() (Op, error) {
	for r.err == nil {
		if !r.s.Scan() {
			r.err = io.EOF
			if err := r.s.Err(); err != nil {
				reason := err.Error()
				if errors.Is(err, bufio.ErrTooLong) {
					reason = fmt.Sprintf("line longer than %d bytes", MaxLine)
				}
				r.err = &ParseError{r.name, r.line + 1, reason}
			}
			break
		}
		r.line++
		b := bytes.TrimSpace(r.s.Bytes())
		if len(b) == 0 {
			continue
		}
		op, reason := r.parse(b)
		if reason != "" && r.unended && !json.Valid(b) {
			r.torn = &ParseError{r.name, r.line, "last line cut off (no newline, not valid JSON): skipped"}
			continue
		}
		if reason != "" {
			r.err = &ParseError{r.name, r.line, reason}
			break
		}
		r.n++
		return op, nil
	}
	return Op{}, r.err
}

// jsonLine is the JSON shape of a line, with pointers to tell missing fields.
type jsonLine struct {
	Index   *int            `json:"index"`
	Type    *Type           `json:"type"`
	F       *string         `json:"f"`
	Process json.RawMessage `json:"process"`
	Time    *int64          `json:"time"`
	Key     string          `json:"key"`
	Value   *Value          `json:"value"`
	Error   string          `json:"error"`
}

// parse decodes and validates one non-blank line. It returns a non-empty
// reason if the line is invalid.
func (r *Reader) parse(b []byte) (Op, string) {
	var l jsonLine
	if err := json.Unmarshal(b, &l); err != nil {
		return Op{}, "bad JSON: " + err.Error()
	}
	switch {
	case l.Type == nil:
		return Op{}, "missing type"
	case !l.Type.valid():
		return Op{}, fmt.Sprintf("unknown type %q", *l.Type)
	case l.F == nil || *l.F == "":
		return Op{}, "missing f"
	case l.Process == nil:
		return Op{}, "missing process"
	case l.Time == nil:
		return Op{}, "missing time"
	case *l.Time < 0:
		return Op{}, fmt.Sprintf("negative time %d", *l.Time)
	}
	op := Op{Index: r.n, Type: *l.Type, F: *l.F, Time: *l.Time, Key: l.Key, Value: l.Value, Error: l.Error}
	if l.Index != nil {
		op.Index = *l.Index
	}
	if err := op.Process.UnmarshalJSON(l.Process); err != nil {
		return Op{}, "bad process: " + err.Error()
	}
	if op.Process == Nemesis {
		return op, ""
	}
	return op, r.pair(op)
}

// pair checks a client op against the process's operation in flight.
func (r *Reader) pair(op Op) string {
	switch op.F {
	case Acquire, Release, Read, Write:
	default:
		return fmt.Sprintf("unknown f %q for process %d", op.F, op.Process)
	}
	inv, busy := r.inflight[op.Process]
	if op.Type == Invoke {
		if busy {
			return fmt.Sprintf("process %d invokes %s while %s is in flight (invoked at line %d)",
				op.Process, op.F, inv.f, inv.line)
		}
		r.inflight[op.Process] = pending{f: op.F, key: op.Key, time: op.Time, line: r.line}
		return ""
	}
	switch {
	case !busy:
		return fmt.Sprintf("%s for process %d with no invoke in flight", op.Type, op.Process)
	case op.F != inv.f:
		return fmt.Sprintf("completion f %q does not match invoke f %q of process %d (invoked at line %d)",
			op.F, inv.f, op.Process, inv.line)
	case op.Key != inv.key:
		return fmt.Sprintf("completion key %q does not match invoke key %q of process %d (invoked at line %d)",
			op.Key, inv.key, op.Process, inv.line)
	case op.Time < inv.time:
		return fmt.Sprintf("completion time %d is before invoke time %d of process %d (invoked at line %d)",
			op.Time, inv.time, op.Process, inv.line)
	}
	delete(r.inflight, op.Process)
	return ""
}
