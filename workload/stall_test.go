package workload

import (
	"testing"
	"time"

	"github.com/locktest/locktest/histories"
)

func TestStalled(t *testing.T) {
	t0 := time.Now()
	for _, c := range []struct {
		gap, want time.Duration
	}{
		{stallTick, 0},                // on time
		{stallTick + stallMin - 1, 0}, // late, but less than a stall
		{stallTick + stallMin, stallTick + stallMin},
		{2 * time.Second, 2 * time.Second}, // the pg-lease sweep's seed 1
	} {
		if got := stalled(t0, t0.Add(c.gap)); got != c.want {
			t.Errorf("stalled after %v = %v, want %v", c.gap, got, c.want)
		}
	}
	// The event the contract check reads: a valid nemesis record.
	op := stallEvent(2 * time.Second)
	op.Time = int64(3 * time.Second)
	if _, why := histories.NewTracker().Track(op, 0, 1); why != "" {
		t.Errorf("stall event %+v refused: %s", op, why)
	}
	op.Value.Params["duration_ns"] = "-1"
	if _, why := histories.NewTracker().Track(op, 0, 1); why == "" {
		t.Error("a stall with a negative duration_ns was accepted")
	}
	op = stallEvent(2 * time.Second)
	if op.F != histories.FStall || op.Value.Params["duration_ns"] != "2000000000" {
		t.Errorf("stall event %+v", op)
	}
}
