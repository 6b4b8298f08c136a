package harness

import "github.com/locktest/locktest/nemesis"

// OfferedCells are the (lock state × fault) cells the planned run can
// strike: those its system's fault kinds (as the recipe suffers them)
// reach, of its families (nemesis.OfferedCells). Known before any server
// starts, from the backend's prototype system.
func (p *Plan) OfferedCells() []nemesis.Cell {
	if len(p.Nemesis.Faults) == 0 || p.System == nil {
		return nil
	}
	return nemesis.OfferedCells(p.system.Prototype, p.faults)
}
