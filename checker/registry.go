// The registry of checks: every verdict judged from a run, in the order
// results show them. A new check is a file with its judgement (and, if it
// has them, its rule for a history cut short and its summary line) and one
// line here; results, cut histories, the CLI's summary and --require,
// sweeps, comparisons and the reference page learn it from here.

package checker

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/locktest/locktest/histories"
)

// Input is what the checks judge: the paired history, the members' hashes
// of their final state (nil: none collected), and the options.
type Input struct {
	History *History
	Hashes  []MemberHash
	Options Options
}

// Check is one verdict judged from a run.
type Check struct {
	Name  string
	Judge func(in Input) Result
	// Cut, if set, says what a history cut short (c) hides of the check's
	// result r: why r must be unknown, or "" when the cut hides nothing of
	// it. bound is the liveness bound the checks used. Nil: nothing.
	Cut func(h *History, r Result, c *Cut, bound time.Duration) string
	// Line, if set, is the check's summary after its verdict (h the
	// history judged, nil when not at hand). Nil: its operations, keys,
	// unknown outcomes and time (see Summary).
	Line func(r Result, h *History) string
	// Spreads says the check spreads its work over the cores itself
	// (porcupine's): such checks run one after another, so that their
	// memory is not needed at once.
	Spreads bool
	// Doc says what it judges and what invalid means, for the generated
	// reference (docs/reference/checks.md).
	Doc string
}

var checks = []Check{
	{Name: histories.CheckMutex, Judge: func(in Input) Result { return in.History.Mutex(in.Options) }, Spreads: true, Doc: "the acquire/release operations of each lock against a mutex model (porcupine). Invalid: two clients held the lock at once as far as they could tell, or a grant's token did not grow. Under pauses and lease expiry this is expected of any lease lock: a lock alone is not mutual exclusion."},
	{Name: histories.CheckResource, Judge: func(in Input) Result { return in.History.Resource(in.Options) }, Cut: resourceCut, Spreads: true, Doc: "the reads and writes of each key against a fenced register (porcupine). Invalid: the resource accepted a write with a lower token than one it had already accepted, or a read saw a value it should not have: the user's data was damaged. A write of unknown outcome is judged by the resource's own log."},
	{Name: histories.CheckInvariant, Judge: func(in Input) Result { return in.History.Invariant() }, Cut: invariantCut, Spreads: false, Doc: "the workload's own arithmetic: no update lost (each write is the value its writer read, plus one), no stock item sold twice. Unknown when writes of unknown outcome could hide a violation."},
	{Name: histories.CheckLiveness, Judge: func(in Input) Result { return in.History.Liveness(in.Options.LivenessBound) }, Cut: livenessCut, Line: livenessLine, Spreads: false, Doc: "once every fault has ended, every client that asked for the lock got it before the lock had been idle (nobody holding it, nobody granted it) for --liveness-bound in its wait; stuck clients are named. Waiting behind others' grants and sections, however long, is not stuck. Unknown when no time was fault-free or the quiet period was too short to tell. Besides, at any time: a client that gave up waiting behind a node of its own session, never granted, that it did not know it had (a ghost: the server's truth says so, on ZooKeeper) is invalid; so is a node never granted that stayed in the lock's queue after its client was refused definitely, still there when the same session made a later node, gone only with the session (an orphan)."},
	{Name: histories.CheckContract, Judge: func(in Input) Result { return in.History.Contract() }, Spreads: false, Doc: "is the lock itself broken? The eight promises a lease lock can keep: tokens grow; no grant of a lost lock; overlap only after loss; release only your own; a live holder keeps its claim; a release that returned ok took effect; a live grant is not called lost; a grant holds a claim of its grantee's session (where the lock tells it). Invalid exactly when one definitely broke; a promise the history cannot order is named and left unknown."},
	{Name: histories.CheckConsistency, Judge: func(in Input) Result { return Consistency(in.Hashes) }, Cut: consistencyCut, Line: consistencyLine, Spreads: false, Doc: "all members hold the same state (the same hash at the same revision) at the end of the run. Unknown on a history file, which holds no hashes."},
}

// Checks returns every check, in the order results show them.
func Checks() []Check { return slices.Clone(checks) }

// lookup returns the registered check named name.
func lookup(name string) (Check, bool) {
	i := slices.IndexFunc(checks, func(c Check) bool { return c.Name == name })
	if i < 0 {
		return Check{}, false
	}
	return checks[i], true
}

// Summary says in one line what r judged, after its verdict: the check's
// own Line, or its operations, keys, unknown outcomes and time. h is the
// history judged, nil when not at hand.
func Summary(r Result, h *History) string {
	if c, ok := lookup(r.Name); ok && c.Line != nil {
		return c.Line(r, h)
	}
	segs := ""
	if r.Segments > 0 && r.Checked < r.Segments {
		segs = fmt.Sprintf(" (%d of %d segments)", r.Checked, r.Segments)
	}
	return fmt.Sprintf("%d ops, %d keys, %d unknown outcomes, checked in %s%s", r.Ops, r.Keys, r.Unknown, r.Duration.Round(time.Millisecond), segs)
}

// Names returns the names of the checks, in the order results show them.
func Names() []string {
	out := make([]string, len(checks))
	for i, c := range checks {
		out[i] = c.Name
	}
	return out
}

// Judge runs every check on in, at once (those that spread over the cores
// themselves one after another, the others beside them), and returns their
// results in the registry's order.
func Judge(in Input) []Result {
	if p := in.Options.Progress; p != nil {
		var mu sync.Mutex
		in.Options.Progress = func(check string, done, total int) {
			mu.Lock()
			defer mu.Unlock()
			p(check, done, total)
		}
	}
	out := make([]Result, len(checks))
	var wg sync.WaitGroup
	wg.Go(func() {
		for i, c := range checks {
			if c.Spreads {
				out[i] = c.Judge(in)
			}
		}
	})
	for i, c := range checks {
		if !c.Spreads {
			wg.Go(func() { out[i] = c.Judge(in) })
		}
	}
	wg.Wait()
	return out
}
