package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/locktest/locktest/internal/histgen"
)

// TestMain lets a test run locktest itself in a process of its own: with
// LOCKTEST_CLI_ARGS set (arguments separated by spaces), the test binary
// is locktest with those arguments.
func TestMain(m *testing.M) {
	if args := os.Getenv("LOCKTEST_CLI_ARGS"); args != "" {
		os.Exit(mainArgs(strings.Split(args, " "), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

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
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := histgen.Write(f, histgen.Config{Acquisitions: 125_000}); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
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
