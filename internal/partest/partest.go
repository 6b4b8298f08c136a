// Package partest lets a package's tests that mostly wait (on servers, on
// leases running out, on a run's clock) run more of them at once than the
// machine has cores. It is imported by tests only.
package partest

import (
	"flag"
	"strconv"
	"testing"
)

// Parallel is how many parallel tests run at once in a package that asks
// for it: go test's default is GOMAXPROCS (2 on the CI machine), which
// leaves a package of tests waiting out seconds of TTL each running them
// two by two while the CPU idles.
const Parallel = 4

// Raise sets -test.parallel to Parallel, unless the command line set it.
// Call it from TestMain, before m.Run.
func Raise() { RaiseTo(Parallel) }

// RaiseTo sets -test.parallel to n, unless the command line set it: for a
// package whose parallel tests cost next to no CPU (a cluster each that
// idles while the test waits out its faults), where the longest would
// otherwise wait for a turn and end the package late.
func RaiseTo(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
			panic(err) // the testing package defines the flag
		}
	}
}

// Main runs m's tests with Raise's parallelism: the TestMain of a package
// that needs nothing else (go test exits with the status m.Run returned).
func Main(m *testing.M) {
	Raise()
	m.Run()
}
