package main

import (
	"os"
	"testing"
	"time"

	"github.com/locktest/locktest/internal/proc"
)

// TestRuns runs the CLI's end-to-end runs on real servers side by side:
// each mostly waits on its servers and its run's clock, not on the CPU
// (VersionCommit, a build of locktest, goes beside them too).
// Once all are done, no process any of them started may be left: the
// tests that count this process's sockets and goroutines (TestRunEndToEnd,
// the shrink tests) stay apart, as top-level tests that run alone, and so
// does TestNightlyOnABudget, whose budget counts the wall-clock time its
// runs take.
func TestRuns(t *testing.T) {
	t.Run("each", func(t *testing.T) {
		for _, r := range []struct {
			name string
			test func(*testing.T)
		}{
			// etcd; the longest first
			{"Etcd11456", testEtcd11456},
			{"RunWithFaults", testRunWithFaults},
			{"RunProcessCluster", testRunProcessCluster},
			{"RunExternal", testRunExternal},
			{"StoppedProcessRun", testStoppedProcessRun},
			{"KilledRuns", testKilledRuns},
			{"RunLive", testRunLive},
			// Redis
			{"RunRedisDel", testRunRedisDel},
			{"RunRedisSetNXFenced", testRunRedisSetNXFenced},
			{"RunRedlock", testRunRedlock},
			{"RedlockBareQuorum", testRedlockBareQuorum},
			{"RunRedisFailover", testRunRedisFailover},
			{"RunRedisClockJumpEmulated", testRunRedisClockJumpEmulated},
			{"CompareAcrossBackends", testCompareAcrossBackends},
			// A build of locktest, beside the runs' waiting.
			{"VersionCommit", testVersionCommit},
		} {
			t.Run(r.name, func(t *testing.T) {
				t.Parallel()
				r.test(t)
			})
		}
	})
	if !eventually(t, 5*time.Second, func() bool { return len(proc.Children(os.Getpid())) == 0 }) {
		t.Fatalf("processes outlived the runs: %v", proc.Children(os.Getpid()))
	}
}
