package nemesis

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// The lock states a fault can strike in, as the run saw them when it
// struck: the first of a coverage cell's two coordinates (the other is the
// fault's family).
const (
	StateHolder     = "holder"             // a client holding a lock
	StateMidSection = "holder-mid-section" // a holder entering a section with work ahead
	StateWaiter     = "waiter"             // a client queued in Acquire
	StateIdle       = "idle"               // a client neither holding nor waiting
	StateRelease    = "release-in-flight"  // a holder's release on its way
	StateAcquire    = "acquire-in-flight"  // an acquire on its way: a grant being decided
	StateRenew      = "renewing"           // a session's renewal on its way
	StateLeader     = "leader"             // the members' leader
	StateMember     = "member"             // a member that is not known to lead
	StateCluster    = "cluster"            // the cluster's links (partitions)
)

// Cell is one (lock state × fault family) pair, and how often a run's
// faults struck it.
type Cell struct {
	State string `json:"state"`
	Fault string `json:"fault"` // the family
	Count int    `json:"count,omitempty"`
}

// Key names the cell: "waiter×pause".
func (c Cell) Key() string { return c.State + "×" + c.Fault }

// State is the lock state a fired fault struck in: by the kind (a lost
// reply strikes one operation), the role its client had, or the member it
// struck.
func (f Fired) State() string {
	switch f.Fault {
	case LostReplyRelease:
		return StateRelease
	case LostReplyAcquire:
		return StateAcquire
	case LostReplyRenew:
		return StateRenew
	}
	switch f.Params["role"] {
	case "holder":
		if f.Params["aimed"] == "true" {
			return StateMidSection
		}
		return StateHolder
	case "waiter":
		return StateWaiter
	case "idle":
		return StateIdle
	}
	if f.Params["selector"] == TargetLeader && f.Params["resolved"] != "fallback" {
		return StateLeader
	}
	if len(f.Targets) > 0 {
		return StateMember
	}
	return StateCluster
}

// CellsOf counts the cells that faults struck: those that started without
// an error. Sorted by fault, then state.
func CellsOf(faults []Fired) []Cell {
	n := map[Cell]int{}
	for _, f := range faults {
		if fam := FamilyOf(f.Fault); f.Error == "" && fam != "" {
			n[Cell{State: f.State(), Fault: fam}]++
		}
	}
	return counted(n)
}

// counted lists the cells of n with their counts, by fault, then state.
func counted(n map[Cell]int) []Cell {
	out := make([]Cell, 0, len(n))
	for c, k := range n {
		c.Count = k
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Cell) int {
		return cmp.Or(cmp.Compare(a.Fault, b.Fault), cmp.Compare(a.State, b.State))
	})
	return out
}

// Unreached are the client states that a workload of clients, whose
// longest critical section thinks for longest, never puts a client in,
// each with why: a system offers their cells, but no fault finds a client
// in them (its selector falls back to another client, which strikes
// another cell).
func Unreached(clients int, longest time.Duration) map[string]string {
	out := map[string]string{}
	if clients < 2 {
		out[StateWaiter] = "one client: nobody waits for a lock"
	}
	if longest < workAhead {
		out[StateMidSection] = fmt.Sprintf("no critical section has %s of work ahead (the longest thinks %s)", workAhead, longest)
	}
	return out
}
