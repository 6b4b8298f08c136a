package checker

import (
	"testing"

	"github.com/locktest/locktest/histories"
)

func (h *hist) setup(params map[string]string) *hist {
	h.recs = append(h.recs, histories.Op{Type: histories.Info, F: "setup", Process: histories.Nemesis, Time: 0,
		Value: &histories.Value{Params: params}})
	return h
}

func TestInvariantCounterValid(t *testing.T) {
	h := (&hist{}).setup(map[string]string{"workload": "counter"}).
		read(0, "k", 1, 2, ok, 0).write(0, "k", 3, 4, ok, 5, 1).
		read(1, "k", 5, 6, ok, 1).write(1, "k", 7, 8, ok, 6, 2).
		read(2, "k", 9, 10, ok, 2).write(2, "k", 11, 12, info, 7, 3).
		read(3, "k", 20, 21, ok, 2)
	r := Invariant(h.ops())
	expect(t, r, Valid)
	if r.Unknown != 1 || r.Keys != 1 {
		t.Errorf("result %+v", r)
	}
}

func TestInvariantCounterLostUpdates(t *testing.T) {
	// Processes 0 and 1 both read 0 and both write 1; then 2 writes 2, and
	// 0 writes its stale 1 again.
	h := (&hist{}).
		read(0, "k", 1, 2, ok, 0).read(1, "k", 1, 2, ok, 0).
		write(0, "k", 3, 4, ok, 5, 1).write(1, "k", 5, 6, ok, 6, 1).
		read(2, "k", 7, 8, ok, 1).write(2, "k", 9, 10, ok, 7, 2).
		write(0, "k", 11, 12, ok, 5, 1).
		read(3, "k", 20, 21, ok, 1)
	r := Invariant(h.ops())
	expect(t, r, Invalid, `4 writes were accepted but the final value is 1: 3 updates were lost`, "both had read the same value")
	c := Build(h.ops()).InvariantCounts()[0]
	if c.Accepted != 4 || c.Final != 1 || c.Lost != 3 || c.Workload != histories.WorkloadCounter {
		t.Errorf("counts %+v", c)
	}
}

func TestInvariantStock(t *testing.T) {
	// Two items. Three sales accepted, the count ends at 2: one oversold,
	// one lost from the count.
	h := (&hist{}).setup(map[string]string{"workload": "stock", "items": "2"}).
		read(0, "k", 1, 2, ok, 0).write(0, "k", 3, 4, ok, 5, 1).
		read(1, "k", 5, 6, ok, 1).read(2, "k", 5, 6, ok, 1).
		write(1, "k", 7, 8, ok, 6, 2).write(2, "k", 9, 10, ok, 7, 2).
		read(3, "k", 11, 12, ok, 2).write(3, "k", 13, 14, fail, 3, 3).
		read(4, "k", 20, 21, ok, 2)
	r := Invariant(h.ops())
	expect(t, r, Invalid, "the resource accepted 3 sales of 2 items: 1 oversold",
		"3 sales were accepted but the stock fell by only 2 (final stock 0 of 2 items): 1 sale was lost from the count")
	if len(r.Violations) != 2 || r.Violations[0].Kind != "oversold" || r.Violations[1].Kind != "lost-update" {
		t.Errorf("violations %+v", r.Violations)
	}
}

func TestInvariantStockQuiet(t *testing.T) {
	h := (&hist{}).setup(map[string]string{"workload": "stock", "items": "1"}).
		read(0, "k", 1, 2, ok, 0).write(0, "k", 3, 4, ok, 5, 1).
		read(1, "k", 5, 6, ok, 1).
		read(2, "k", 20, 21, ok, 1)
	expect(t, Invariant(h.ops()), Valid)
}

func TestInvariantNoFinalRead(t *testing.T) {
	h := (&hist{}).read(0, "k", 1, 2, ok, 0).write(0, "k", 3, 4, ok, 5, 1)
	expect(t, Invariant(h.ops()), Unknown, "no read followed the last write")
}

// The setup event is no fault: stories do not mention it.
func TestSetupIsNoFault(t *testing.T) {
	h := Build((&hist{}).setup(map[string]string{"workload": "counter"}).acq(0, "k", 1, 2, ok, 5).ops())
	if f := h.faults(); len(f) != 0 {
		t.Errorf("faults %+v", f)
	}
}

// Writes of unknown outcome that could hide a lost update or an oversold
// item leave the invariant unknown, in numbers.
func TestInvariantHiddenByUnknown(t *testing.T) {
	// Process 1's write of 2 is unknown; process 2 then reads 1 and writes
	// 2. Had 1's write taken effect first, 2's update was lost.
	h := (&hist{}).setup(map[string]string{"workload": "counter"}).
		read(0, "k", 1, 2, ok, 0).write(0, "k", 3, 4, ok, 5, 1).
		read(1, "k", 5, 6, ok, 1).write(1, "k", 7, 30, info, 6, 2).
		read(2, "k", 9, 10, ok, 1).write(2, "k", 11, 12, ok, 7, 2).
		read(3, "k", 40, 41, ok, 2)
	expect(t, Invariant(h.ops()), Unknown, "1 write had unknown outcomes", "the final value 2 shows 1 write fewer than the 3 that may have taken effect")
	// Stock: one item left, one sale accepted and one unknown.
	h = (&hist{}).setup(map[string]string{"workload": "stock", "items": "1"}).
		read(0, "k", 1, 2, ok, 0).write(0, "k", 3, 40, info, 5, 1).
		read(1, "k", 5, 6, ok, 0).write(1, "k", 7, 8, ok, 6, 1).
		read(2, "k", 50, 51, ok, 1)
	expect(t, Invariant(h.ops()), Unknown, "1 accepted sales plus 1 of unknown outcome exceed the 1 items")
}
