package workload

import (
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/polltest"
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
	polltest.Until(t, time.Minute, "100 ms of starvation recorded", func() bool {
		s.look("c3", 7, target)
		return recorded(t, rec) >= 100*time.Millisecond
	})
	ops := rec.Read(t)
	tr := histories.NewTracker()
	for i, op := range ops {
		if _, why := tr.Track(op, i, i+1); why != "" {
			t.Fatalf("starved event %+v refused: %s", op, why)
		}
		p := op.Value.Params
		if op.F != histories.FStarved || op.Value.Targets[0] != "c3" || p["process"] != "7" || p["pid"] != strconv.Itoa(target) {
			t.Fatalf("recorded %+v, want a starved event of c3, process 7, pid %d", op, target)
		}
		if d, _ := strconv.ParseInt(p["duration_ns"], 10, 64); d > mustInt(t, p["span_ns"]) {
			t.Errorf("starved for %s ns of a span of %s ns", p["duration_ns"], p["span_ns"])
		}
	}
}

// recorded is how long the starved events recorded so far say.
func recorded(t *testing.T, rec *recordtest.Recorder) time.Duration {
	ops, _ := rec.Snapshot()
	var d time.Duration
	for _, op := range ops {
		d += time.Duration(mustInt(t, op.Value.Params["duration_ns"]))
	}
	return d
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
