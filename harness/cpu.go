package harness

import (
	"time"

	"github.com/locktest/locktest/backend/etcd/cluster"
	"github.com/locktest/locktest/internal/proc"
)

// serverPids are the processes of the system's servers that run apart from
// locktest (Redis servers and Sentinels, etcd member processes), whose CPU
// time the process's own does not include; none for embedded members or a
// cluster locktest did not start.
func serverPids(sys any) []int {
	var pids []int
	add := func(pid int) {
		if pid > 0 {
			pids = append(pids, pid)
		}
	}
	switch s := sys.(type) {
	case *redisSystem:
		for _, r := range append(s.d.Servers(), s.d.Sentinels()...) {
			add(r.Pid())
		}
	case *cluster.Cluster:
		for _, m := range s.Members() {
			add(m.Pid())
		}
	}
	return pids
}

// serverCPU measures the CPU time of the system's server processes over a
// phase: start it at the beginning, and call what it returns at the end
// (nil when the servers have no processes of their own). A server
// restarted in between is found again by its new process.
func serverCPU(sys any) func() *time.Duration {
	if len(serverPids(sys)) == 0 {
		return func() *time.Duration { return nil }
	}
	before := proc.ServerCPU(serverPids(sys))
	return func() *time.Duration {
		d := proc.ServerCPU(serverPids(sys)) - before
		return &d
	}
}
