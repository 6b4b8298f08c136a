package main

import (
	"testing"

	"github.com/locktest/locktest/internal/fakebackend"
)

// onFakeBackend gives the commands the fake backend (internal/fakebackend:
// its lock in memory, no server) until t ends, for a test of the CLI's own
// logic. The commands all read the one backendSet: a test that calls this
// stays serial (no t.Parallel), as one that sets any package hook.
func onFakeBackend(t *testing.T) {
	t.Helper()
	prev := backendSet
	backendSet = fakebackend.Set
	t.Cleanup(func() { backendSet = prev })
}
