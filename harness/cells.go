package harness

import (
	"slices"

	"github.com/locktest/locktest/nemesis"
)

// OfferedCells are the (lock state × fault) cells the planned run can
// strike: those its system's fault kinds (as the recipe suffers them)
// reach, of its families (nemesis.OfferedCells), but for the states its
// workload never puts a client in (Unreached). Known before any server
// starts, from the backend's prototype system.
func (p *Plan) OfferedCells() []nemesis.Cell {
	if len(p.Nemesis.Faults) == 0 || p.System == nil {
		return nil
	}
	gone := p.Unreached()
	return slices.DeleteFunc(nemesis.OfferedCells(p.system.Prototype, p.faults), func(c nemesis.Cell) bool {
		_, ok := gone[c.State]
		return ok
	})
}

// Unreached are the client states the planned workload never puts a
// client in, with why (nemesis.Unreached).
func (p *Plan) Unreached() map[string]string {
	w := p.Workload
	longest := w.ThinkMax
	if w.SlowShare > 0 {
		_, hi := w.SlowRange()
		longest = max(longest, hi)
	}
	return nemesis.Unreached(w.Clients, longest)
}
