package nemesis

import (
	"context"
	"testing"
	"time"

	"github.com/locktest/locktest/system"
)

// lateFailover promotes r1 once promoted is closed, and gives up when its
// ctx ends first.
type lateFailover struct {
	prototype
	promoted chan struct{}
}

func (lateFailover) MemberNames() []string { return []string{"r0", "r1"} }

func (f lateFailover) Failover(ctx context.Context) (system.Promotion, error) {
	select {
	case <-f.promoted:
		return system.Promotion{Old: 0, New: 1, How: "promoted by the test", Took: time.Second}, nil
	case <-ctx.Done():
		return system.Promotion{}, ctx.Err()
	}
}

// A failover that strikes near the run's end waits for its promotion past
// that end: the master is lost either way, and the fault must say whether
// the replica was promoted (a loaded run's wait, cut by the run's end,
// failed with "no Sentinel answered" after the Sentinels had switched).
// And a failover that finds no holder strikes by the run's last moment for
// it (aimBy), not aimWait later.
func TestFailoverAwaitsThePromotionPastTheRunsEnd(t *testing.T) {
	t.Parallel()
	sys := lateFailover{promoted: make(chan struct{})}
	env := &Env{Sys: sys, Clients: &fakeClients{names: []string{"c0", "c1"}}}
	env.aimBy = time.Now().Add(100 * time.Millisecond)
	began := time.Now()
	inj, err := failover{}.Inject(context.Background(), env, Entry{Fault: Failover, Target: TargetHolder, Fallback: "c0"})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took >= aimWait/2 || inj.Params["holder"] == "" {
		t.Fatalf("with no holder, the failover struck after %s (its last moment was 100ms), holder %q", took, inj.Params["holder"])
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel() // the run has ended
	time.AfterFunc(100*time.Millisecond, func() { close(sys.promoted) })
	extra := inj.Hold(ended, time.Second)
	if extra["promoted"] != "r1" {
		t.Fatalf("the run ended before the promotion: the fault says %v, want r1 promoted", extra)
	}
	if err := inj.Stop(context.Background()); err != nil {
		t.Fatalf("stop after a promotion past the run's end: %v", err)
	}
}
