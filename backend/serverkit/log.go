package serverkit

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// LogWriter is a log file in the run directory. A nil *LogWriter discards
// what it is given, and what is written after Close is dropped: toxiproxy's
// goroutines may still log as they wind down after it has been closed, and
// would complain on stderr of a closed file.
type LogWriter struct {
	mu sync.Mutex
	f  *os.File
}

// OpenLog creates (empties) dir/name; it returns nil, which discards, when
// dir is "".
func OpenLog(dir, name string) (*LogWriter, error) {
	if dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &LogWriter{f: f}, nil
}

func (w *LogWriter) Write(p []byte) (int, error) {
	if w == nil {
		return len(p), nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return len(p), nil
	}
	return w.f.Write(p)
}

// Sync flushes the file to disk.
func (w *LogWriter) Sync() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	return w.f.Sync()
}

// Close closes the file; later writes are dropped.
func (w *LogWriter) Close() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	f := w.f
	w.f = nil
	if f == nil {
		return nil
	}
	return f.Close()
}

// Since is what the file at path holds from offset from on.
func Since(path string, from int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.NewSectionReader(f, from, 1<<40))
}

// LastLine is the last non-empty line of a log file (the error reading it
// when it cannot be read).
func LastLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return lastLine(b)
}

func lastLine(b []byte) string {
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return string(b)
}

func size(path string) int64 {
	if fi, err := os.Stat(path); err == nil {
		return fi.Size()
	}
	return 0
}
