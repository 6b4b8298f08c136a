package etcd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/locktest/locktest/backend/etcd/cluster"
	"github.com/locktest/locktest/backend/etcd/etcdlock"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/recordtest"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/resource"
	"github.com/locktest/locktest/workload"
)

// env is a cluster, a resource and a workload on etcd recording to a
// history file: the workload's clients, faults and etcd's observer at
// work on real members.
type env struct {
	t    *testing.T
	cl   *cluster.Cluster
	res  *resource.Server
	path string
	w    *histories.Writer
	rec  *recordtest.Recorder
	wl   *workload.Workload
	stop chan struct{}
	done chan runResult
}

type runResult struct {
	st  workload.Stats
	err error
}

func setup(t *testing.T, mode resource.Mode, cfg workload.Config) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := keptDir(t)
	cl, err := cluster.Start(ctx, cluster.Config{LogDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	e := &env{t: t, cl: cl, path: filepath.Join(dir, "history.jsonl")}
	addr := ""
	if mode == TxnMode {
		cfg.Resource = TxnMode
	} else {
		res, err := resource.Start(mode)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { res.Close() })
		e.res, addr = res, res.Addr()
	}
	e.w, err = histories.Create(e.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.w.Close() })
	e.rec = recordtest.New(e.w)
	e.wl, err = workload.New(ctx, cfg, Workload(cl), addr, e.rec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.wl.Close() })
	return e
}

// keptDir is the test's directory (the members' logs, the history),
// kept when the test fails and said in its log with the leaders the
// members elected: each new leader extends every lease by its TTL.
func keptDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "etcd-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(dir)
			return
		}
		t.Logf("the members' logs and the history are kept in %s; %d leaders elected", dir, elections(dir))
	})
	return dir
}

// elections counts the leaders elected in the members' logs in dir.
func elections(dir string) int {
	logs, _ := filepath.Glob(filepath.Join(dir, "etcd-*.log"))
	n := 0
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		n += bytes.Count(b, []byte("became leader at term"))
	}
	return n
}

func (e *env) start() {
	e.stop = make(chan struct{})
	e.done = make(chan runResult, 1)
	go func() {
		st, err := e.wl.Run(context.Background(), e.stop)
		e.done <- runResult{st, err}
	}()
}

// finish stops the run, closes everything and returns the stats and the
// history as read back (and validated) from the file.
func (e *env) finish() (workload.Stats, []histories.Op) {
	e.t.Helper()
	close(e.stop)
	var r runResult
	select {
	case r = <-e.done:
	case <-time.After(30 * time.Second):
		e.t.Fatal("Run did not return within 30s of stop")
	}
	if r.err != nil {
		e.t.Fatalf("Run: %v", r.err)
	}
	e.wl.Close()
	if err := e.w.Close(); err != nil {
		e.t.Fatal(err)
	}
	ops, err := histories.ReadFile(e.path)
	if err != nil {
		e.t.Fatalf("history is not well-formed: %v", err)
	}
	return r.st, ops
}

// waitPaused waits until client's pause begins.
func (e *env) waitPaused(client string) {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !e.wl.Paused(client) {
		if time.Now().After(deadline) {
			e.t.Fatal("the armed pause did not begin within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

// pausedUntil keeps client's pause going until an op at or after index
// from satisfies pred (another client granted and writing, say), and returns
// that op; the client resumes at most two seconds later. A pause of a fixed
// few TTLs is not enough to outlast a lease: every new etcd leader extends
// each lease by its TTL, and a loaded machine changes leaders now and then.
func (e *env) pausedUntil(client string, from int, what string, pred func(histories.Op) bool) histories.Op {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if op, ok := e.rec.LookFor(200*time.Millisecond, from, pred); ok {
			return op
		}
		if !e.wl.Paused(client) {
			e.t.Fatalf("%s's pause ended before %s", client, what)
		}
		if time.Now().After(deadline) {
			ops, _ := e.rec.Snapshot()
			e.t.Fatalf("no %s within 20s of %s's pause; history:\n%s", what, client, recordtest.Dump(ops))
		}
		if err := e.wl.Pause(client, 2*time.Second, false); err != nil {
			e.t.Fatal(err)
		}
	}
}

// testConfig is two clients of the mutex recipe, with no slow sections:
// each test says what sections it needs.
func testConfig() workload.Config {
	cfg := workload.DefaultConfig()
	cfg.Clients = 2
	cfg.TTL = 2
	cfg.Seed = 1
	cfg.SlowShare = 0
	cfg.Recipe = etcdlock.Mutex()
	return cfg
}

// recipe is the built-in etcd recipe called name.
func recipe(t *testing.T, name string) lock.Recipe {
	t.Helper()
	for _, b := range etcdlock.Builtins {
		if b.Name == name {
			return b.New()
		}
	}
	t.Fatalf("no etcd recipe %s", name)
	return nil
}

// processOf returns the client name of an initial process number.
func nameOf(p histories.Process) string { return "c" + p.String() }

func isOp(typ histories.Type, f string, p histories.Process) func(histories.Op) bool {
	return func(op histories.Op) bool { return op.Type == typ && op.F == f && op.Process == p }
}

func nemesisEvent(f, target, by string) func(histories.Op) bool {
	return func(op histories.Op) bool {
		if op.Process != histories.Nemesis || op.F != f || op.Value == nil {
			return false
		}
		if len(op.Value.Targets) != 1 || op.Value.Targets[0] != target {
			return false
		}
		return by == "" || op.Value.Params["by"] == by
	}
}

func tokenOf(op histories.Op) int64 {
	tok, _ := op.Token()
	return tok
}

func ms(ns int64) time.Duration { return time.Duration(ns).Round(time.Millisecond) }
