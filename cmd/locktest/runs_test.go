package main

import (
	"os"
	"testing"
	"time"

	"github.com/locktest/locktest/internal/partest"
	"github.com/locktest/locktest/internal/proc"
)

// TestRuns runs the CLI's end-to-end runs on real servers side by side:
// each mostly waits on its servers and its run's clock, not on the CPU
// (VersionCommit, a go build, and the runs of the CLI's own logic on the
// fake backend, which wait on their clocks too, go beside them).
// Once all are done, no process any of them started may be left. A test
// that counts its process's sockets and goroutines runs alone: as a
// top-level test (TestRunEndToEnd, TestShrinkBadInput), or, the longer
// ones, beside the runs in a process of its own (alone:
// TestShrinkEndToEnd). The longest runs (TestEtcd11456's two) go in a
// process of their own too, started first rather than whenever a turn
// comes. TestNightlyOnABudget stays apart: its budget counts the
// wall-clock time its runs take.
func TestRuns(t *testing.T) {
	t.Run("each", func(t *testing.T) {
		for _, r := range []struct {
			name string
			test func(*testing.T) // nil: the top-level test "Test"+name, alone
		}{
			// etcd; the longest first
			{"RunProcessCluster", testRunProcessCluster},
			{"RunExternal", testRunExternal},
			{"StoppedProcessRun", testStoppedProcessRun},
			{"KilledRuns", testKilledRuns},
			// Redis
			{"RunRedisDel", testRunRedisDel},
			{"RunRedisSetNXFenced", testRunRedisSetNXFenced},
			{"RunRedlock", testRunRedlock},
			{"RedlockBareQuorum", testRedlockBareQuorum},
			{"RunRedisFailover", testRunRedisFailover},
			{"RunRedisClockJumpEmulated", testRunRedisClockJumpEmulated},
			// ZooKeeper (zookeeper_test.go)
			{"ZooKeeperStoppedRun", testZooKeeperStoppedRun},
			{"ZooKeeperRun", testZooKeeperRun},
			{"ZooKeeperGhostNode", testZooKeeperGhostNode},
			{"ZooKeeperSessionExpiry", testZooKeeperSessionExpiry},
			{"ZooKeeperNoRecheckCaught", testZooKeeperNoRecheckCaught},
			// The CLI's own logic on the fake backend (internal/fakebackend),
			// beside the others: each waits out its runs' clocks. The live
			// page in a child process; a run's faults and their replay;
			// compare across two backends.
			{"RunLive", testRunLive},
			{"RunWithFaults", testRunWithFaults},
			{"CompareAcrossBackends", testCompareAcrossBackends},
			// A go build, beside the runs' waiting.
			{"VersionCommit", testVersionCommit},
			// In a process of its own each: tests that count their
			// process's sockets, and the longest runs (two at once).
			{"ShrinkEndToEnd", nil},
			{"Etcd11456", nil},
		} {
			t.Run(r.name, func(t *testing.T) {
				test := r.test
				if test == nil {
					// Started before the wait for a turn among the
					// runsAtOnce: the longest runs (20-40 s) start first.
					test = partest.Alone(t, "Test"+r.name)
				}
				t.Parallel()
				test(t)
			})
		}
	})
	if !eventually(t, 5*time.Second, func() bool { return len(proc.Children(os.Getpid())) == 0 }) {
		t.Fatalf("processes outlived the runs: %v", proc.Children(os.Getpid()))
	}
}

// runsAtOnce is how many of TestRuns's runs go on at once, besides those
// in processes of their own (partest.Alone): they mostly wait, and with four at
// once TestRuns took 58-61 s, with six 45-50 s, for the same CPU.
const runsAtOnce = 6
