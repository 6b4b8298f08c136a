package cluster

import (
	"testing"

	"github.com/locktest/locktest/internal/partest"
)

// The tests here mostly wait on servers of their own.
func TestMain(m *testing.M) { partest.Main(m) }

// ownProcess are the tests that count their process's goroutines or set
// Start's test hooks: they run one after another in a process of their
// own (TestOwnProcess), beside the others, instead of before them all in
// this one (20 s of the package's 33).
var ownProcess = []string{"TestEndToEnd", "TestExternal", "TestExternalBadInput", "TestExternalTLS",
	"TestFailedStartCleansUp", "TestRemoveAndAddMember", "TestStartRetriesOnPortConflict"}

func TestOwnProcess(t *testing.T) {
	wait := partest.Alone(t, ownProcess...)
	t.Parallel()
	wait(t)
}
