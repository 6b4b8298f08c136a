package nemesis

import (
	"testing"

	"github.com/locktest/locktest/internal/partest"
)

// The tests here mostly wait on clusters of their own, which idle (the
// package's tests take about 4 s of CPU in 40 s): eight at once, so that
// the longest (TestRunMember, some 16 s of a fresh cluster refusing to be
// reconfigured) does not wait for a turn behind the others and end the
// package late.
func TestMain(m *testing.M) {
	partest.RaiseTo(8)
	m.Run()
}
