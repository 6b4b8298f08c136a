package workload_test

import (
	"context"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/recordtest"
	"github.com/locktest/locktest/resource"
	"github.com/locktest/locktest/workload"
)

// fakeRun is a workload of clients on the fake lock service and the fenced
// HTTP resource, recording into rec; Run's result comes on done.
type fakeRun struct {
	wl   *workload.Workload
	rec  *recordtest.Recorder
	stop chan struct{}
	done chan workload.Stats
}

func startFake(t *testing.T, cfg workload.Config) *fakeRun {
	t.Helper()
	res, err := resource.Start(resource.Fenced)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Close() })
	cfg.Recipe = fakeRecipe{}
	r := &fakeRun{rec: recordtest.Create(t), stop: make(chan struct{}), done: make(chan workload.Stats, 1)}
	if r.wl, err = workload.New(context.Background(), cfg, fakeBackend{newTable()}, res.Addr(), r.rec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.wl.Close() })
	go func() {
		st, err := r.wl.Run(context.Background(), r.stop)
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		r.done <- st
	}()
	return r
}

// finish stops the run and returns its stats and its history, read back.
func (r *fakeRun) finish(t *testing.T) (workload.Stats, []histories.Op) {
	t.Helper()
	close(r.stop)
	st := <-r.done
	r.wl.Close()
	return st, r.rec.Read(t)
}

func okOp(f string) func(histories.Op) bool {
	return func(op histories.Op) bool { return op.Type == histories.OK && op.F == f }
}

// A run of a correct lock with the fenced resource, on the fake: the
// history starts with the setup event, reads back well-formed, and every
// check finds it valid (the workload records nothing a correct lock did
// not do); the stats count what it records; the final read, by a process
// of its own, finds every accepted write; Run runs once.
func TestRunOnAFake(t *testing.T) {
	t.Parallel()
	cfg := workload.DefaultConfig()
	cfg.Clients, cfg.Seed, cfg.SlowShare = 3, 1, 0
	r := startFake(t, cfg)
	released := map[int]bool{}
	r.rec.WaitFor(t, time.Minute, 0, "twenty releases", func(op histories.Op) bool {
		if okOp(histories.Release)(op) {
			released[op.Index] = true
		}
		return len(released) >= 20
	})
	st, ops := r.finish(t)
	if _, err := r.wl.Run(context.Background(), make(chan struct{})); err == nil {
		t.Error("a second Run: no error")
	}

	if ops[0].F != histories.FSetup || ops[0].Value.Params["backend"] != "fake" || ops[0].Value.Params["recipe"] != "fake-mutex" {
		t.Errorf("first op %+v, want the setup event naming the backend and the recipe", ops[0])
	}
	acquired, written := 0, int64(0)
	for _, op := range ops {
		switch {
		case okOp(histories.Acquire)(op):
			acquired++
		case okOp(histories.Write)(op):
			written++
		}
	}
	if acquired == 0 || st.Acquisitions != acquired {
		t.Errorf("stats count %d acquisitions, the history %d", st.Acquisitions, acquired)
	}
	// Then only the end, which Close records.
	last, end := ops[len(ops)-2], ops[len(ops)-1]
	if end.F != histories.FEnd {
		t.Errorf("last op %+v, want the end", end)
	}
	if !okOp(histories.Read)(last) || last.Process != histories.Process(cfg.Clients) || *last.Value.Value != written {
		t.Errorf("last op %+v: want the final read, by process %d, of the %d accepted writes", last, cfg.Clients, written)
	}
	for _, c := range checker.Linearizable(ops, checker.Options{}) {
		if c.Verdict != checker.Valid {
			t.Errorf("%s %s: %s", c.Name, c.Verdict, c.Explanation)
		}
	}
}

// A crash, on the fake: the crashed client goes on as a new process, the
// crashed process completes nothing after the crash, its locker is
// orphaned though it keeps no session (a watchdog lock's: before, such a
// locker was abandoned still extending its grant, and the lock was never
// granted again), and the stats count it. (That a real server then
// expires the orphaned session is backend/etcd's TestCrash.)
func TestCrashOnAFake(t *testing.T) {
	t.Parallel()
	cfg := workload.DefaultConfig()
	cfg.Clients, cfg.Seed, cfg.SlowShare = 2, 1, 0
	cfg.ThinkMin, cfg.ThinkMax = time.Second, time.Second // a holder is mostly in its section
	r := startFake(t, cfg)
	acq := r.rec.WaitFor(t, time.Minute, 0, "an acquire", okOp(histories.Acquire))
	name := "c" + acq.Process.String()
	if err := r.wl.Crash(name); err != nil {
		t.Fatal(err)
	}
	next := r.rec.WaitFor(t, time.Minute, acq.Index, "an op of a new process", func(op histories.Op) bool { return op.Process >= histories.Process(cfg.Clients) })
	// The lock is granted again: the crashed process's session ended (the
	// fake expires an orphaned one at once).
	again := r.rec.WaitFor(t, time.Minute, next.Index, "another grant", okOp(histories.Acquire))
	st, ops := r.finish(t)
	if st.Crashes != 1 {
		t.Errorf("crashes %d, want 1", st.Crashes)
	}
	if next.Process != histories.Process(cfg.Clients) {
		t.Errorf("the new process is %d, want %d, the first number after the clients'", next.Process, cfg.Clients)
	}
	for _, op := range ops {
		if op.Process == acq.Process && op.Index > next.Index {
			t.Errorf("the crashed process %d is still active after its crash: %+v", acq.Process, op)
		}
	}
	t.Logf("process %d crashed; process %d took over; process %d granted the lock next", acq.Process, next.Process, again.Process)
}
