// Package proctest helps the tests that show that the OS processes a run
// starts never outlive it. It is imported by tests only.
package proctest

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/internal/proc"
)

// KillParent runs this test binary again as a parent: test is the test it
// runs, env what tells that test to be the parent, which starts want
// processes and prints their pids on its first line of output. KillParent
// then kills the parent with SIGKILL and fails unless all want processes
// were running and are gone within 10 s.
func KillParent(t *testing.T, test string, want int, env ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the parent's pids: %v", err)
	}
	var pids []int
	for _, f := range strings.Fields(line) {
		pid, err := strconv.Atoi(f)
		if err != nil || !proc.Alive(pid) {
			t.Fatalf("the parent said %q: %q is not a running process", line, f)
		}
		pids = append(pids, pid)
	}
	if len(pids) != want {
		t.Fatalf("the parent started %d processes (%q), want %d", len(pids), line, want)
	}
	cmd.Process.Kill()
	cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for proc.Alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d outlived its parent", pid)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
