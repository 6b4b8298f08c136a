// Package recordtest helps tests that record a history: a recorder
// that keeps what it records in memory, so that a test can wait for an op.
package recordtest

import (
	"sync"
	"testing"
	"time"

	"github.com/locktest/locktest/histories"
)

// Recorder records through a histories.Recorder to a history file, and
// keeps the ops in memory as the history numbers them.
type Recorder struct {
	rec     *histories.Recorder
	mu      sync.Mutex
	ops     []histories.Op
	changed chan struct{} // closed at the next op
}

// New records to w, its times from now.
func New(w *histories.Writer) *Recorder {
	return &Recorder{rec: histories.NewRecorder(w, time.Now()), changed: make(chan struct{})}
}

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
