// A read-only view of a paired History, for those who draw it (the report).

package checker

import (
	"iter"
	"maps"

	"github.com/locktest/locktest/histories"
)

// Operation is a client operation as the History paired it: an invocation
// with its completion.
type Operation struct {
	Process histories.Process
	F, Key  string
	// Status is ok, fail or info; info also when Missing (no completion by
	// the end of the history).
	Status  histories.Type
	Missing bool
	// Call and Return are the times of the invocation and completion (the
	// history's end if Missing); Invoked and Completed their history
	// indices (Completed -1 if Missing).
	Call, Return       int64
	Invoked, Completed int
	// Token and Value, when Has*: the grant's or write's token, the value
	// written or read.
	Token, Value       int64
	HasToken, HasValue bool
}

// Operations returns the client operations in invocation order.
func (h *History) Operations() iter.Seq[Operation] {
	return func(yield func(Operation) bool) {
		for _, o := range h.ops {
			if !yield(Operation{Process: o.process, F: o.f, Key: o.key, Status: o.status, Missing: o.missing, Call: o.call, Return: o.ret,
				Invoked: o.inv, Completed: o.done, Token: o.tok, Value: o.val, HasToken: o.hasTok, HasValue: o.hasVal}) {
				return
			}
		}
	}
}

// Span returns the time of the history's first record, and a time later
// than its last (at most the largest int64).
func (h *History) Span() (start, end int64) { return h.start, h.end }

// Faults returns the nemesis's fault windows, in the order they started
// in the history.
func (h *History) Faults() []Fault { return h.sd.faults }

// Events returns the nemesis events of an f the checks do not read (no
// fault: a fault has a start), as points.
func (h *History) Events() []Fault { return h.sd.others }

// Heal returns the time of the final heal, if the history has one.
func (h *History) Heal() (int64, bool) { return h.sd.heal, h.sd.heal >= 0 }

// Deletions returns the server's deletions of lock keys the observer
// recorded.
func (h *History) Deletions() []Deletion { return h.sd.deletions }

// LeaseLost is a client's noticing that its lease was gone while it held a
// lock ("lease-lost").
type LeaseLost struct {
	Key     string
	Token   int64
	Targets []string
	Time    int64
	Index   int
}

// LeasesLost returns the lease-lost events.
func (h *History) LeasesLost() []LeaseLost {
	out := make([]LeaseLost, len(h.sd.lost))
	for i, l := range h.sd.lost {
		out[i] = LeaseLost{l.key, l.token, l.targets, l.time, l.index}
	}
	return out
}

// Clients returns the client behind each process the history's process
// events name.
func (h *History) Clients() map[histories.Process]string { return maps.Clone(h.sd.clients) }

// Setup returns the params of the history's setup event (nil: none).
func (h *History) Setup() map[string]string { return maps.Clone(h.sd.setup) }
