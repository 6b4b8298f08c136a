package histories

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// errClosed is returned by writes after Close.
var errClosed = errors.New("histories: writer closed")

// Writer appends operations to a history, one JSON line per operation. It is
// safe for concurrent use. Each line goes to the underlying writer in a
// single, unbuffered Write call, so a run that dies leaves a history whose
// lines are complete up to (at most) one torn last line, which the Reader
// reports.
type Writer struct {
	mu   sync.Mutex
	w    io.Writer
	f    *os.File // set when Create opened the file; Close closes it
	next int      // index of the next operation
	err  error    // sticky: after a failed write, later lines would follow a torn one
}

// NewWriter returns a Writer appending to w. Close does not close w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Create creates (or truncates) the file at path and returns a Writer to it.
func Create(path string) (*Writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &Writer{w: f, f: f}, nil
}

// Write assigns op the next index (0, 1, 2, ...) and appends it. It returns
// op as written.
func (w *Writer) Write(op Op) (Op, error) { return w.write(op, nil) }

// write appends op. If stamp is non-nil, it sets op.Time under the same lock
// that assigns the index, so that index order is time order.
func (w *Writer) write(op Op, stamp func() int64) (Op, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return op, w.err
	}
	if stamp != nil {
		op.Time = stamp()
	}
	op.Index = w.next
	line, err := MarshalLine(op)
	if err != nil {
		return op, fmt.Errorf("histories: encode op %d: %w", op.Index, err)
	}
	if _, err := w.w.Write(append(line, '\n')); err != nil {
		w.err = fmt.Errorf("histories: write op %d: %w", op.Index, err)
		return op, w.err
	}
	w.next++
	return op, nil
}

// Close stops the Writer. If Create opened the file, Close syncs and closes
// it. Writes after Close fail.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == errClosed {
		return nil
	}
	w.err = errClosed
	if w.f == nil {
		return nil
	}
	return errors.Join(w.f.Sync(), w.f.Close())
}

// Recorder writes operations stamped with their time since the start of the
// run.
type Recorder struct {
	w     *Writer
	start time.Time
}

// NewRecorder returns a Recorder writing to w, with times measured from
// start. start should carry a monotonic clock reading (as time.Now does), so
// that times never go backwards.
func NewRecorder(w *Writer, start time.Time) *Recorder {
	return &Recorder{w: w, start: start}
}

// Record sets op's Time to now and its Index, and appends it. It returns op
// as written.
func (r *Recorder) Record(op Op) (Op, error) {
	return r.w.write(op, func() int64 {
		// Clamp: readers reject negative times, e.g. from a start
		// instant slightly in the future.
		return max(int64(time.Since(r.start)), 0)
	})
}

// At is the time in the history of t, an instant read from the host's
// wall clock alone (another process's, a server's): the wall clock's
// time since the start. False when the wall clock has not kept pace with
// the monotonic one that times the history (it was stepped or slewed by
// wallSkew or more since the start): then t cannot be placed.
func (r *Recorder) At(t time.Time) (int64, bool) {
	now := time.Now()
	skew := now.Round(0).Sub(r.start.Round(0)) - now.Sub(r.start)
	if skew.Abs() >= wallSkew {
		return 0, false
	}
	return int64(t.Round(0).Sub(r.start.Round(0))), true
}

// wallSkew is how far the wall clock may stray from the monotonic one for
// At: far below what a judgement on such times turns on.
const wallSkew = time.Millisecond

// Close closes the underlying Writer.
func (r *Recorder) Close() error { return r.w.Close() }
