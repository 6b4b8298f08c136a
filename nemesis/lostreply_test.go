package nemesis

import (
	"context"
	"slices"
	"testing"
	"time"
)

// A lost acquire reply aimed at the holder strikes its next acquire, armed
// only once its section has ended: armed at once, the hook fired on an
// acquire already sent by a holder that had let go meanwhile, whose reply
// had come (zk-ghost-node made no ghost on a loaded host).
func TestLostAcquireReplyOfAHolderWaitsForItsSectionEnd(t *testing.T) {
	t.Parallel()
	fc := &fakeClients{names: []string{"c0", "c1"}, holder: "c1"}
	env := &Env{Sys: prototype{}, Clients: fc}
	type result struct {
		inj *Injected
		err error
	}
	done := make(chan result, 1)
	go func() {
		inj, err := lostReply{}.Inject(context.Background(), env, Entry{Fault: LostReplyAcquire, Target: TargetHolder, Fallback: "c0"})
		done <- result{inj, err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fc.fire(t, ctx) // the section's end: only now is the acquire armed
	fc.fire(t, ctx) // the next acquire, as it is sent
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	fc.mu.Lock()
	calls := slices.Clone(fc.calls)
	fc.mu.Unlock()
	if want := []string{"intercept c1 section-end", "intercept c1 acquire"}; !slices.Equal(calls, want) || r.inj.Params["in_flight"] != "" {
		t.Fatalf("calls %v, params %v; want %v, not in flight", calls, r.inj.Params, want)
	}
}
