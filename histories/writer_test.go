package histories

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// lineWriter records each Write call, to check one call per line.
type lineWriter struct {
	mu    sync.Mutex
	calls []string
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, string(b))
	return len(b), nil
}

func TestRecorderConcurrent(t *testing.T) {
	lw := &lineWriter{}
	rec := NewRecorder(NewWriter(lw), time.Now())
	const goroutines, perG = 16, 200
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perG {
				op := Op{Type: Invoke, F: Read, Process: Process(g), Time: -1}
				if i%2 == 1 {
					op.Type = OK
					op.Value = ReadValue(int64(i))
				}
				if _, err := rec.Record(op); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if len(lw.calls) != goroutines*perG {
		t.Fatalf("%d write calls, want %d", len(lw.calls), goroutines*perG)
	}
	for i, c := range lw.calls {
		if strings.Count(c, "\n") != 1 || !strings.HasSuffix(c, "\n") {
			t.Fatalf("write call %d is not one line: %q", i, c)
		}
	}
	// The output is a valid history, in index order with times that never
	// go backwards.
	ops, err := readAll(t, strings.Join(lw.calls, ""))
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	for i, op := range ops {
		if op.Index != i {
			t.Fatalf("line %d has index %d", i+1, op.Index)
		}
		if op.Time < last {
			t.Fatalf("op %d: time %d before %d", i, op.Time, last)
		}
		last = op.Time
	}
}

func TestWriterConcurrentIndices(t *testing.T) {
	w := NewWriter(io.Discard)
	const goroutines, perG = 8, 500
	idx := make(chan int, goroutines*perG)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range perG {
				op, err := w.Write(Op{Type: Info, F: "kill", Process: Nemesis})
				if err != nil {
					t.Error(err)
					return
				}
				idx <- op.Index
			}
		})
	}
	wg.Wait()
	close(idx)
	seen := make([]bool, goroutines*perG)
	for i := range idx {
		if seen[i] {
			t.Fatalf("index %d assigned twice", i)
		}
		seen[i] = true
	}
	for i, s := range seen {
		if !s {
			t.Fatalf("index %d never assigned", i)
		}
	}
}

func TestRecorderClampsNegativeTime(t *testing.T) {
	var buf bytes.Buffer
	op, err := NewRecorder(NewWriter(&buf), time.Now().Add(time.Hour)).Record(Op{Type: Invoke, F: Read})
	if err != nil || op.Time != 0 {
		t.Fatalf("time %d, %v", op.Time, err)
	}
}

type failWriter struct{ n int }

func (w *failWriter) Write(b []byte) (int, error) {
	w.n++
	return 0, errors.New("disk full")
}

func TestWriterErrorIsSticky(t *testing.T) {
	fw := &failWriter{}
	w := NewWriter(fw)
	if _, err := w.Write(Op{Type: Invoke, F: Read}); err == nil {
		t.Fatal("no error")
	}
	if _, err := w.Write(Op{Type: Invoke, F: Read}); err == nil || fw.n != 1 {
		t.Fatalf("second write: %v after %d calls", err, fw.n)
	}
}

func TestProcessJSON(t *testing.T) {
	for _, tc := range []struct {
		p    Process
		json string
	}{{Nemesis, `"nemesis"`}, {0, `0`}, {12, `12`}} {
		b, err := json.Marshal(tc.p)
		if err != nil || string(b) != tc.json {
			t.Errorf("Marshal(%d) = %s, %v; want %s", tc.p, b, err, tc.json)
		}
		var p Process
		if err := json.Unmarshal([]byte(tc.json), &p); err != nil || p != tc.p {
			t.Errorf("Unmarshal(%s) = %d, %v", tc.json, p, err)
		}
	}
	b, _ := MarshalLine(Op{Index: 3, Type: Info, F: "partition", Process: Nemesis, Time: 9})
	if want := `{"index":3,"type":"info","f":"partition","process":"nemesis","time":9}`; string(b) != want {
		t.Errorf("nemesis line %s, want %s", b, want)
	}
}
