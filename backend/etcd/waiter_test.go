package etcd

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/locktest/locktest/backend/etcd/etcdlock"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/resource"
)

// A fault aimed at a waiter strikes a client blocked in Acquire, and the
// history says so: the revoked lease of a queued mutex waiter ends its wait
// without a grant.
func TestWaiterTargetedFault(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Clients = 3
	cfg.Recipe = recipe(t, etcdlock.MutexName)
	cfg.ThinkMin, cfg.ThinkMax = 400*time.Millisecond, 500*time.Millisecond
	e := setup(t, resource.Fenced, cfg)
	e.start()
	e.firstGrant() // two clients queue behind it within a think time
	ctx, cancel := context.WithCancel(context.Background())
	sched := nemesis.Schedule{Members: 3, Clients: e.wl.Names(), Entries: []nemesis.Entry{
		{At: 100 * time.Millisecond, Fault: nemesis.LeaseRevoke, Target: nemesis.TargetWaiter, Fallback: "c0"},
	}}
	done := make(chan error, 1)
	go func() {
		_, err := nemesis.Run(ctx, nemesis.Config{Members: 3, Clients: e.wl.Names(), TTL: 2 * time.Second}, e.cl, e.wl, e.rec, sched)
		done <- err
	}()
	start := e.rec.WaitFor(t, 5*time.Second, 0, "the fault's start", func(op histories.Op) bool {
		return op.F == histories.FStart && op.Value != nil && op.Value.Fault == nemesis.LeaseRevoke
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	p := start.Value.Params
	if p["selector"] != nemesis.TargetWaiter || p["role"] != "waiter" || p["resolved"] != "" {
		t.Fatalf("start params %v; want selector and role waiter, not a fallback", p)
	}
	struck := start.Value.Targets[0]
	ops, _ := e.rec.Snapshot()
	// The acquire the struck client had in flight when the fault began.
	inFlight := map[histories.Process]bool{}
	for _, op := range ops[:start.Index] {
		if op.Process != histories.Nemesis && op.F == histories.Acquire {
			inFlight[op.Process] = op.Type == histories.Invoke
		}
	}
	proc, ok := histories.Process(-1), false
	for q, waiting := range inFlight {
		if waiting && e.clientOf(ops, q) == struck {
			proc, ok = q, true
		}
	}
	if !ok {
		t.Fatalf("%s had no acquire in flight when struck as a waiter", struck)
	}
	end := e.rec.WaitFor(t, 10*time.Second, start.Index, struck+"'s acquire completion", func(op histories.Op) bool {
		return op.Process == proc && op.F == histories.Acquire && op.Type != histories.Invoke
	})
	if end.Type == histories.OK {
		t.Fatalf("%s was granted the lock after its lease was revoked while it waited: %+v", struck, end)
	}
	e.finish()
}

// clientOf names the client behind process p, from the process events.
func (e *env) clientOf(ops []histories.Op, p histories.Process) string {
	for _, op := range ops {
		if op.F == histories.FProcess && op.Value != nil && op.Value.Params["process"] == p.String() {
			return op.Value.Targets[0]
		}
	}
	return nameOf(p)
}

// The final heal disarms a pause armed for a client's next write, so that
// it cannot strike in the quiet period, and says so.
func TestHealDisarmsArmedPause(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.ThinkMin, cfg.ThinkMax = 5*time.Second, 5*time.Second // no write before the heal
	e := setup(t, resource.Fenced, cfg)
	e.start()
	if err := e.wl.Pause("c1", time.Minute, true); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no faults: straight to the heal
	if _, err := nemesis.Run(ctx, nemesis.Config{Members: 3, Clients: e.wl.Names()}, e.cl, e.wl, e.rec, nemesis.Schedule{Members: 3}); err != nil {
		t.Fatal(err)
	}
	heal := e.rec.WaitFor(t, 5*time.Second, 0, "the heal", func(op histories.Op) bool { return op.F == histories.FHeal })
	if !slices.Contains(heal.Value.Targets, "c1") {
		t.Errorf("heal targets %v, want c1 (its armed pause)", heal.Value.Targets)
	}
	if armed, until := e.wl.Disarm("c1"); armed || !until.IsZero() {
		t.Errorf("after the heal: armed %v, paused until %v; want neither", armed, until)
	}
	e.finish()
}

// A share of sections is slow, and a fault can find a holder entering one:
// Entering names a client that holds the lock and has just begun a think
// of the asked length.
func TestSlowSectionsCanBeAimedAt(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Clients = 3
	cfg.Recipe = recipe(t, etcdlock.MutexName)
	cfg.SlowShare, cfg.SlowMin, cfg.SlowMax = 0.3, 300*time.Millisecond, 400*time.Millisecond
	e := setup(t, resource.Fenced, cfg)
	e.start()
	deadline := time.Now().Add(10 * time.Second)
	var got string
	for got == "" && time.Now().Before(deadline) {
		if c, ok := e.wl.Entering(300*time.Millisecond, 400*time.Millisecond, 50*time.Millisecond); ok {
			got = c
			if role := e.wl.Role(c); role != "holder" {
				t.Errorf("Entering named %s, whose role is %q", c, role)
			}
		}
		time.Sleep(2 * time.Millisecond) // polls, as the nemesis does
	}
	if got == "" {
		t.Fatal("no holder entered a slow section within 10 s")
	}
	if c, ok := e.wl.Entering(5*time.Second, 0, time.Minute); ok {
		t.Errorf("Entering named %s for a section longer than any drawn", c)
	}
	_, ops := e.finish()
	var slow, short int
	for i, op := range ops {
		if op.F != histories.Write || op.Type != histories.Invoke {
			continue
		}
		// The write follows its read by the think time.
		for j := i - 1; j >= 0; j-- {
			if r := ops[j]; r.F == histories.Read && r.Type == histories.OK && r.Process == op.Process {
				if d := time.Duration(op.Time - r.Time); d >= 300*time.Millisecond {
					slow++
				} else if d < 100*time.Millisecond {
					short++
				}
				break
			}
		}
	}
	if slow == 0 || short == 0 {
		t.Errorf("%d slow and %d short sections; want both", slow, short)
	}
}
