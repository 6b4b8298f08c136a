package partest

import (
	"fmt"
	"os"
	"testing"
)

// Alone runs a test in the test binary started again, where Own lets it
// run; here Own skips it.
func TestAlone(t *testing.T) {
	Alone(t, "TestOwn")(t)
}

func TestOwn(t *testing.T) {
	Own(t, "TestAlone")
	parent, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", os.Getppid()))
	if err != nil {
		t.Fatal(err)
	}
	if self, err := os.Executable(); err != nil || self != parent {
		t.Errorf("TestOwn runs in %s (%v), started by %s: want the test binary started by itself", self, err, parent)
	}
}
