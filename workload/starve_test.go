package workload

import (
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/polltest"
	"github.com/locktest/locktest/internal/proc"
	"github.com/locktest/locktest/internal/recordtest"
)

// A real process that shares one CPU with another busy one waits to run
// about half the time: the watcher records it starved, as its client's
// process, with a valid event the liveness check reads.
func TestStarvationRecorded(t *testing.T) {
	busy := func() *exec.Cmd {
		cmd := exec.Command("taskset", "-c", "0", "sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Skipf("taskset: %v", err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	target := busy().Process.Pid
	busy()
	rec := recordtest.Create(t)
	s := starvation{rec: rec, last: map[string]lockProcess{}}
	s.look("c3", 7, target) // the baseline
	base := s.last["c3"].delays[target]
	polltest.Until(t, time.Minute, "the busy process to wait 100 ms to run", func() bool {
		d, err := proc.RunDelays(target)
		return err == nil && d[target]-base >= int64(100*time.Millisecond)
	})
	s.look("c3", 7, target)
	ops := rec.Read(t)
	if len(ops) != 1 {
		t.Fatalf("recorded %d events, want one starved event", len(ops))
	}
	op := ops[0]
	if _, why := histories.NewTracker().Track(op, 0, 1); why != "" {
		t.Fatalf("starved event %+v refused: %s", op, why)
	}
	p := op.Value.Params
	if op.F != histories.FStarved || op.Value.Targets[0] != "c3" || p["process"] != "7" || p["pid"] != strconv.Itoa(target) {
		t.Fatalf("recorded %+v, want a starved event of c3, process 7, pid %d", op, target)
	}
	d, span := mustInt(t, p["duration_ns"]), mustInt(t, p["span_ns"])
	if d < int64(100*time.Millisecond) || d > span {
		t.Errorf("starved for %d ns of a span of %d ns, want 100 ms or more, at most the span", d, span)
	}
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
