package main

import (
	"bytes"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/locktest/locktest/internal/proc"
)

// TestRuns runs the CLI's end-to-end runs on real servers side by side:
// each mostly waits on its servers and its run's clock, not on the CPU
// (VersionCommit, a build of locktest, goes beside them too).
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
					test = alone(t, "Test"+r.name)
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
// in processes of their own (alone): they mostly wait, and with four at
// once TestRuns took 58-61 s, with six 45-50 s, for the same CPU.
const runsAtOnce = 6

// aloneEnv names, in the test binary run again by alone, the one test it
// runs.
const aloneEnv = "LOCKTEST_TEST_ALONE"

// alone starts the top-level test name in a process of its own (the test
// binary again): what it counts of its process (sockets, goroutines) is
// its own while other runs go on in this one. The test it returns waits
// for it.
func alone(t *testing.T, name string) func(*testing.T) {
	if testing.Short() {
		return func(t *testing.T) { t.Skip("replays real runs") }
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), aloneEnv+"="+name)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return func(t *testing.T) {
		err := <-done
		switch {
		case err == nil && bytes.Contains(out.Bytes(), []byte("--- SKIP: "+name)):
			// What it needs is not installed (TestEtcd11456: etcd 3.4).
			t.Skipf("%s in a process of its own skipped:\n%s", name, out.Bytes())
		case err != nil || !bytes.Contains(out.Bytes(), []byte("--- PASS: "+name)):
			t.Fatalf("%s in a process of its own: %v\n%s", name, err, out.Bytes())
		}
	}
}
