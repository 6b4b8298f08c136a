// The registry of checks: every verdict judged from a run, in the order
// results show them. A new check is a file with its judgement and one line
// here; results, the CLI's --require, sweeps and comparisons learn it from
// here.

package checker

import (
	"slices"
	"sync"

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
	// Spreads says the check spreads its work over the cores itself
	// (porcupine's): such checks run one after another, so that their
	// memory is not needed at once.
	Spreads bool
}

var checks = []Check{
	{histories.CheckMutex, func(in Input) Result { return in.History.Mutex(in.Options) }, true},
	{histories.CheckResource, func(in Input) Result { return in.History.Resource(in.Options) }, true},
	{histories.CheckInvariant, func(in Input) Result { return in.History.Invariant() }, false},
	{histories.CheckLiveness, func(in Input) Result { return in.History.Liveness(in.Options.LivenessBound) }, false},
	{histories.CheckContract, func(in Input) Result { return in.History.Contract() }, false},
	{histories.CheckConsistency, func(in Input) Result { return Consistency(in.Hashes) }, false},
}

// Checks returns every check, in the order results show them.
func Checks() []Check { return slices.Clone(checks) }

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
