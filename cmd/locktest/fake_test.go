package main

import (
	"testing"

	"github.com/locktest/locktest/internal/fakebackend"
)

// runOnFake runs locktest with args on the fake backend
// (internal/fakebackend: its lock in memory, no server), for a test of the
// CLI's own logic. The commands run on the backends they are given, so
// such a test may run beside the others (t.Parallel).
func runOnFake(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runMainOn(t, fakebackend.Set, args...)
}
