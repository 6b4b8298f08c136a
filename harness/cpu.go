package harness

import (
	"time"

	"github.com/locktest/locktest/internal/proc"
	"github.com/locktest/locktest/system"
)

// serverPids are the processes of the system's servers that run apart from
// locktest (system.Processes: member processes, Redis servers and
// Sentinels), whose CPU time the process's own does not include; none for
// embedded members or a cluster locktest did not start.
func serverPids(sys system.System) []int {
	if p, ok := sys.(system.Processes); ok {
		return p.ServerPids()
	}
	return nil
}

// serverCPU measures the CPU time of the system's server processes over a
// phase: start it at the beginning, and call what it returns at the end
// (nil when the servers have no processes of their own). A server
// restarted in between is found again by its new process.
func serverCPU(sys system.System) func() *time.Duration {
	if len(serverPids(sys)) == 0 {
		return func() *time.Duration { return nil }
	}
	before := proc.ServerCPU(serverPids(sys))
	return func() *time.Duration {
		d := proc.ServerCPU(serverPids(sys)) - before
		return &d
	}
}
