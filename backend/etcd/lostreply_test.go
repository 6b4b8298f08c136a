package etcd

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/backend/etcd/etcdlock"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/resource"
)

// A lost reply, end to end on real members: the holder's release reaches
// etcd, which deletes its key; the reply is dropped and the connection cut,
// so the client sees an error, and the history records the release with an
// unknown outcome (info). A direct read finds the key gone while the client
// still waits for its answer, and the observer, which watches from outside
// the client's links, says the release deleted it. No check is invalid.
func TestLostReplyEndToEnd(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Recipe = recipe(t, etcdlock.MutexName)
	cfg.ThinkMin, cfg.ThinkMax = 100*time.Millisecond, 200*time.Millisecond
	e := setup(t, resource.Fenced, cfg)
	e.start()
	e.firstGrant()
	ctx, cancel := context.WithCancel(context.Background())
	sched := nemesis.Schedule{Members: 3, Clients: e.wl.Names(), Entries: []nemesis.Entry{
		{At: 200 * time.Millisecond, Fault: nemesis.LostReplyRelease, Target: nemesis.TargetHolder, Fallback: "c0", Duration: 300 * time.Millisecond},
	}}
	done := make(chan error, 1)
	go func() {
		_, err := nemesis.Run(ctx, nemesis.Config{Members: 3, Clients: e.wl.Names(), TTL: 2 * time.Second}, e.cl, e.wl, e.rec, sched)
		done <- err
	}()
	isFault := func(f string) func(histories.Op) bool {
		return func(op histories.Op) bool {
			return op.F == f && op.Value != nil && op.Value.Fault == nemesis.LostReplyRelease
		}
	}
	start := e.rec.WaitFor(t, 15*time.Second, 0, "the fault's start", isFault(histories.FStart))
	struck := start.Value.Targets[0]
	// The release the fault struck: the fault's start is recorded once
	// the hook has fired, just before the request went out, so it is the
	// struck client's last release invoked before the start.
	ops, _ := e.rec.Snapshot()
	var rel histories.Op
	found := false
	for _, op := range ops[:start.Index] {
		if op.F == histories.Release && op.Type == histories.Invoke && e.clientOf(ops, op.Process) == struck {
			rel, found = op, true
		}
	}
	if !found {
		t.Fatalf("%s invoked no release before the fault's start", struck)
	}
	grant := lastGrant(ops, rel.Process, rel.Index)
	tok := tokenOf(grant)
	released := func(op histories.Op) bool {
		return op.Process == rel.Process && op.F == histories.Release && op.Type != histories.Invoke
	}
	// The server applies the release while its reply is held: its key is
	// gone on the server before the client has any answer.
	direct, err := e.cl.DirectClient()
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		gctx, gcancel := context.WithTimeout(context.Background(), time.Second)
		got, err := direct.Get(gctx, grant.Value.Claim)
		gcancel()
		if err == nil && len(got.Kvs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the key %s of token %d is still on the server 5 s after its release was sent", grant.Value.Claim, tok)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if _, answered := e.rec.LookFor(0, rel.Index+1, released); answered {
		t.Errorf("the client had its release's answer before the server was seen to apply it")
	}
	stop := e.rec.WaitFor(t, 15*time.Second, start.Index, "the fault's stop", isFault(histories.FStop))
	end := e.rec.WaitFor(t, 10*time.Second, rel.Index+1, struck+"'s release completion", released)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_, all := e.finish()

	// The client saw an error, and the history says unknown.
	if end.Type != histories.Info || end.Error == "" {
		t.Errorf("the release whose reply was lost was recorded %s (error %q); want info with the client's error", end.Type, end.Error)
	}
	if p := stop.Value.Params; p["reply"] != "lost" || !strings.HasPrefix(p["client_saw"], "error: ") || p["op"] != histories.Release {
		t.Errorf("the fault's stop params %v; want the reply lost and the client's error", p)
	}
	// The observer, from outside the client's links, says the release
	// deleted it.
	var del *histories.Op
	for i, op := range all {
		if op.F == histories.FKeyDeleted && op.Value.Params["create_revision"] == strconv.FormatInt(tok, 10) {
			del = &all[i]
		}
	}
	switch {
	case del == nil:
		t.Errorf("the observer saw no deletion of token %d's key", tok)
	case del.Value.Params["by"] != histories.DeletedByRelease:
		t.Errorf("token %d's key was deleted by %s; want its release", tok, del.Value.Params["by"])
	}
	for name, v := range verdicts(all) {
		if v == checker.Invalid {
			t.Errorf("%s: invalid under a lost reply", name)
		}
	}
}

// lastGrant is process p's last grant recorded before index before.
func lastGrant(ops []histories.Op, p histories.Process, before int) histories.Op {
	var g histories.Op
	for _, op := range ops[:before] {
		if op.Process == p && op.F == histories.Acquire && op.Type == histories.OK {
			g = op
		}
	}
	return g
}
