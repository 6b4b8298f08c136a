package harness

import (
	"fmt"

	"github.com/locktest/locktest/nemesis"
)

// OfferedCells are the (lock state × fault) cells the planned run can
// strike: those its system's fault kinds (as the recipe suffers them)
// reach, of its families (nemesis.OfferedCells). Known before any server
// starts, from the backend's prototype system.
func (p *Plan) OfferedCells() []nemesis.Cell {
	if len(p.Nemesis.Faults) == 0 || p.System == nil {
		return nil
	}
	proto := p.System.Prototype(p.system)
	clients := make([]string, p.Workload.Clients)
	for i := range clients {
		clients[i] = fmt.Sprintf("c%d", i)
	}
	cfg := p.nemesisConfig(clients, fleet{offers: p.recipeOffers(nemesis.Offered(proto))})
	return nemesis.OfferedCells(proto, cfg)
}
