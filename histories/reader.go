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
// need not be held in memory. It validates each line, and the rules across
// lines (Tracker): a completion (ok, fail or info) must follow an invoke of
// the same process, f and key, a process has at most one operation in
// flight, indexes are unique, and a process number belongs to one client.
// Nemesis operations may have any f; those the checks read must hold what
// they need. An invoke left without completion at the end is not an error:
// it counts as info.
//
// Hand-written histories are welcome: times need not start at zero (only be
// non-negative), index may be absent (the position is used), unknown fields
// are ignored at every level, and nemesis params may hold numbers. Every
// rejection is a *ParseError naming the file, the line and the reason.
type Reader struct {
	s     *bufio.Scanner
	name  string
	line  int // lines consumed
	n     int // operations returned
	rules *Tracker
	dec   decoder
	inv   int   // for the last op returned, the number of its invocation
	err   error // sticky
	// unended is set when the line just scanned had no newline: the file's
	// last line. torn is that line, if it was also not valid JSON.
	unended bool
	torn    *ParseError
}

// NewReader returns a Reader of r; name is used in error messages.
func NewReader(r io.Reader, name string) *Reader {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 64<<10), MaxLine)
	rd := &Reader{s: s, name: name, rules: NewTracker()}
	s.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		adv, tok, err := bufio.ScanLines(data, atEOF)
		rd.unended = tok != nil && atEOF && bytes.IndexByte(data[:adv], '\n') < 0
		return adv, tok, err
	})
	return rd
}

// Reuse lets the Reader write each operation's value (its targets and
// params too) over the last one's: for a caller that copies out what it
// keeps of an operation before the next call to Next, a long history then
// makes no garbage of values.
func (r *Reader) Reuse() { r.dec.reuse = true }

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
	return ReadAll(f, path)
}

// ReadAll reads and validates a whole history from r; name is used in error
// messages.
func ReadAll(r io.Reader, name string) ([]Op, error) {
	var ops []Op
	rd := NewReader(r, name)
	for {
		op, err := rd.Next()
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
		if r.line == 1 {
			b = bytes.TrimPrefix(b, []byte("\ufeff")) // a byte order mark, as some editors write
		}
		if len(b) == 0 {
			continue
		}
		op, reason := r.parse(b)
		if reason == "" {
			r.inv, reason = r.rules.Track(op, r.n, r.line)
		}
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

// Completes returns, when the last operation Next returned is a
// completion, the number of the operation (0 for the first Next returned)
// whose invocation it completes; else -1.
func (r *Reader) Completes() int { return r.inv }

// parse decodes one non-blank line and checks its shape. It returns a
// non-empty reason if the line is invalid.
func (r *Reader) parse(b []byte) (Op, string) {
	l, ok := r.dec.decode(b)
	if !ok {
		var reason string
		if l, reason = decodeSlow(b); reason != "" {
			return Op{}, reason
		}
	}
	switch {
	case !l.hasType:
		return Op{}, "missing type"
	case !l.typ.valid():
		return Op{}, fmt.Sprintf("unknown type %q", l.typ)
	case l.f == "":
		return Op{}, "missing f"
	case !l.hasPr:
		return Op{}, "missing process"
	case !l.hasTime:
		return Op{}, "missing time"
	case l.time < 0:
		return Op{}, fmt.Sprintf("negative time %d", l.time)
	case l.processErr != "":
		return Op{}, "bad process: " + l.processErr
	}
	op := Op{Index: r.n, Type: l.typ, F: l.f, Process: l.process, Time: l.time, Key: l.key, Value: l.value, Error: l.err}
	if l.hasIndex {
		op.Index = l.index
	}
	return op, ""
}
