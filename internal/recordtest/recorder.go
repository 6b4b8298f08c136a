// Package recordtest helps tests that record a history: a recorder
// that keeps what it records in memory, so that a test can wait for an op.
package recordtest

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/locktest/locktest/histories"
)

// Recorder records through a histories.Recorder to a history file, and
// keeps the ops in memory as the history numbers them.
type Recorder struct {
	path    string            // the file, if Create made it
	w       *histories.Writer // its writer
	rec     *histories.Recorder
	mu      sync.Mutex
	ops     []histories.Op
	changed chan struct{} // closed at the next op
}

// New records to w, its times from now.
func New(w *histories.Writer) *Recorder {
	return &Recorder{rec: histories.NewRecorder(w, time.Now()), changed: make(chan struct{})}
}

// Create records to a history file in t's temporary directory, which
// Read reads back.
func Create(t testing.TB) *Recorder {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	w, err := histories.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	r := New(w)
	r.path, r.w = path, w
	return r
}

// Read closes the history Create made and reads it back, which checks
// that it is well-formed.
func (r *Recorder) Read(t testing.TB) []histories.Op {
	t.Helper()
	if err := r.w.Close(); err != nil {
		t.Fatal(err)
	}
	ops, err := histories.ReadFile(r.path)
	if err != nil {
		t.Fatalf("the history is not well-formed: %v", err)
	}
	return ops
}

// At is histories.Recorder.At.
func (r *Recorder) At(t time.Time) (int64, bool) { return r.rec.At(t) }

// Record records op to the history and keeps it.
func (r *Recorder) Record(op histories.Op) (histories.Op, error) {
	op, err := r.rec.Record(op)
	if err != nil {
		return op, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op)
	close(r.changed)
	r.changed = make(chan struct{})
	return op, nil
}

// Snapshot returns the ops so far, and a channel closed at the next.
func (r *Recorder) Snapshot() ([]histories.Op, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]histories.Op(nil), r.ops...), r.changed
}

// WaitFor waits until an op at or after index from satisfies pred, and
// returns it; it fails the test at the deadline, with the history.
func (r *Recorder) WaitFor(t testing.TB, timeout time.Duration, from int, what string, pred func(histories.Op) bool) histories.Op {
	t.Helper()
	op, ok := r.LookFor(timeout, from, pred)
	if !ok {
		ops, _ := r.Snapshot()
		t.Fatalf("no %s within %v; history:\n%s", what, timeout, Dump(ops))
	}
	return op
}

// LookFor waits until an op at or after index from satisfies pred, and
// returns it; false at the deadline.
func (r *Recorder) LookFor(timeout time.Duration, from int, pred func(histories.Op) bool) (histories.Op, bool) {
	deadline := time.After(timeout)
	for {
		ops, changed := r.Snapshot()
		for _, op := range ops[min(from, len(ops)):] {
			if pred(op) {
				return op, true
			}
		}
		select {
		case <-changed:
		case <-deadline:
			return histories.Op{}, false
		}
	}
}

// Dump is ops as history lines, for a failing test's message.
func Dump(ops []histories.Op) string {
	var b []byte
	for _, op := range ops {
		l, _ := histories.MarshalLine(op)
		b = append(append(b, l...), '\n')
	}
	return string(b)
}
