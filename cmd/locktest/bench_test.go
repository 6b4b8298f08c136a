package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/locktest/locktest/internal/fuzzseed"
	"github.com/locktest/locktest/internal/histgen"
)

// BenchmarkCheckMillion re-checks a history of a million client records
// (125,000 acquisitions on one lock, each with a read, a write and a
// release, beside the observer's deletions) as `locktest check --require
// mutex,resource FILE` does, report page included, in a process of its
// own. It reports that process's wall time (ns/op), CPU time (cpu-s) and
// peak resident memory (peak-RSS-MB). Run with
//
//	go test ./cmd/locktest -run '^$' -bench BenchmarkCheckMillion -benchtime 3x
func BenchmarkCheckMillion(b *testing.B) {
	path := filepath.Join(b.TempDir(), "million.jsonl")
	if err := histgen.File(path, histgen.Million); err != nil {
		b.Fatal(err)
	}
	var rss int64
	var cpu time.Duration
	for b.Loop() {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "LOCKTEST_CLI_ARGS=check --require mutex,resource "+path)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("locktest check: %v\n%s", err, out)
		}
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		rss = max(rss, ru.Maxrss)
		cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b.ReportMetric(float64(rss)/1024, "peak-RSS-MB")
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s")
}

// FuzzCheck runs the whole of `locktest check --require all` (reading,
// every check, the visualizations and the report page) on any input, and
// holds it to an answer: exit 0, 1 or 2, a one-line error when the input
// is malformed, within a minute, and with memory bounded by the input's
// size (not by the time it spans, nor anything else it says). Its seeds
// are the curated histories and the hand-written ones.
func FuzzCheck(f *testing.F) {
	for _, b := range fuzzseed.Histories(f, "../..") {
		f.Add(b)
	}
	// A temporary directory of its own: every command sweeps it for what
	// killed runs left, and says so on a line of its own.
	f.Setenv("TMPDIR", f.TempDir())
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "h.jsonl")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		type answer struct {
			code        int
			out, errOut string
		}
		done := make(chan answer, 1)
		go func() {
			var out, errOut strings.Builder
			code := mainArgs(ownBackends, []string{"check", "--require", "all", "--timeout", "20s", path}, &out, &errOut)
			done <- answer{code, out.String(), errOut.String()}
		}()
		var a answer
		select {
		case a = <-done:
		case <-time.After(time.Minute):
			t.Fatalf("locktest check of %d bytes still running after a minute", len(b))
		}
		runtime.ReadMemStats(&after)
		if alloc, bound := after.TotalAlloc-before.TotalAlloc, uint64(256<<20+4096*len(b)); alloc > bound {
			t.Fatalf("locktest check of %d bytes allocated %d MB, more than %d MB", len(b), alloc>>20, bound>>20)
		}
		switch {
		case a.code != exitValid && a.code != exitInvalid && a.code != exitUnknown:
			t.Fatalf("exit %d", a.code)
		case a.out == "" && (a.code != exitUnknown || strings.Count(strings.TrimSuffix(a.errOut, "\n"), "\n") != 0 || !strings.Contains(a.errOut, "h.jsonl:")):
			t.Fatalf("exit %d without a verdict, and not one line naming h.jsonl:LINE: %q", a.code, a.errOut)
		case a.out != "" && !strings.Contains(a.out, "verdict: "):
			t.Fatalf("exit %d, no verdict:\n%s%s", a.code, a.out, a.errOut)
		}
	})
}
