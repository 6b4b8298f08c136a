// Command stamped prints what locktest version prints of its build
// (harness.BuildVersions), one "name version" a line: built by
// TestRuns/VersionCommit, a main package of locktest's module as the
// locktest command is, linked in a third of the time.
package main

import (
	"fmt"

	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/internal/fakebackend"
)

func main() {
	for _, c := range harness.BuildVersions(fakebackend.Set) {
		fmt.Println(c.Name, c.Version)
	}
}
