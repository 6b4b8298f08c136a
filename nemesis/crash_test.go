package nemesis

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/locktest/locktest/histories"
)

// A crash with param until=grant keeps the holder at the strike in its
// section (a hook on its section's end) until another client is granted
// the lock, however long after the restart that comes: the next grant
// comes while it holds. Without a grant, it lets the holder go when the
// fault's stop runs out, saying why (param missed).
func TestCrashUntilGrantHoldsTheHolder(t *testing.T) {
	t.Parallel()
	c, ctx := startCluster(t)
	fc := &fakeClients{names: []string{"c0", "c1"}, holder: "c0"}
	env := &Env{Sys: c, Clients: fc}
	e := Entry{Fault: CrashMember, Target: "m1", Params: map[string]string{"until": "grant"}}
	inj, err := crash{}.Inject(ctx, env, e)
	if err != nil || inj.Params["held"] != "c0" || !slices.Contains(fc.callList(), "intercept c0 "+histories.SectionEnd) {
		t.Fatalf("inject: %v, params %v, calls %v; want c0's section's end hooked", err, inj.Params, fc.callList())
	}
	// The holder ends its section: held there.
	released := make(chan struct{})
	go func() {
		fc.fire(t, ctx)
		close(released)
	}()
	stopped := make(chan error, 1)
	go func() { stopped <- inj.Stop(ctx) }()
	for !c.Running(1) {
		if !sleepUntil(ctx, time.Now().Add(5*time.Millisecond)) {
			t.Fatal("m1 was not restarted")
		}
	}
	select {
	case <-released:
		t.Fatal("the holder was let go before another client was granted the lock")
	case err := <-stopped:
		t.Fatalf("the fault stopped before another client was granted the lock: %v", err)
	default:
	}
	fc.mu.Lock()
	fc.holder = "c1"
	fc.mu.Unlock()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	<-released
	if inj.Params["granted_meanwhile"] != "c1" || inj.Params["missed"] != "" {
		t.Errorf("params %v; want granted_meanwhile c1", inj.Params)
	}

	// No other grant before the stop runs out: the holder is let go.
	fc = &fakeClients{names: []string{"c0", "c1"}, holder: "c0"}
	env.Clients = fc
	inj = &Injected{Params: map[string]string{}}
	wait := env.holdUntilGrant(e, inj)
	done, cancel := context.WithCancel(ctx)
	cancel()
	wait(done)
	h := fc.take()
	h.before() // let go: it returns at once
	if inj.Params["missed"] != "no other client was granted the lock while c0 held it" {
		t.Errorf("params %v; want missed", inj.Params)
	}
}
