// Package polltest waits, in tests, for a condition that something else
// brings about: a process state, a leader, a replicated key. It is imported
// by tests only.
package polltest

import (
	"testing"
	"time"
)

// Until polls cond every 5 ms until it holds, and fails t once timeout has
// passed without it, naming what it waited for.
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
