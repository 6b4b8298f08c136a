package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/locktest/locktest/nemesis"
)

// The nightly steers each random run to the candidate seed whose schedule
// plans the most cells not yet struck, and its summary names the cells
// struck and those planned but missed, of the families played.
func TestCoverageSteers(t *testing.T) {
	waiterPause := nemesis.Cell{State: nemesis.StateWaiter, Fault: "pause"}
	holderPause := nemesis.Cell{State: nemesis.StateHolder, Fault: "pause"}
	release := nemesis.Cell{State: nemesis.StateRelease, Fault: "lost-reply"}
	leaderCrash := nemesis.Cell{State: nemesis.StateLeader, Fault: "crash"}
	plans := map[int64][]nemesis.Cell{
		1: {holderPause},
		2: {holderPause, waiterPause},
		3: {release},
		4: {leaderCrash},
	}
	planned := func(seed int64) ([]nemesis.Cell, error) {
		if seed == 5 {
			return nil, errors.New("no schedule")
		}
		return plans[seed], nil
	}
	cv := newCoverage()
	if got := cv.steer([]int64{5, 1, 2, 3}, planned); got != 2 {
		t.Errorf("nothing struck yet: seed %d, want 2 (two fresh cells)", got)
	}
	cv.strike([]nemesis.Cell{{State: nemesis.StateHolder, Fault: "pause", Count: 2}, {State: nemesis.StateWaiter, Fault: "pause", Count: 1}})
	cv.offer([]string{"pause", "lost-reply"})
	if got := cv.steer([]int64{1, 2, 3}, planned); got != 3 {
		t.Errorf("both pause cells struck: seed %d, want 3 (the release)", got)
	}
	cv.steer([]int64{4}, planned) // planned, but crash was never played
	var b strings.Builder
	cv.write(&b)
	want := "cells struck (lock state × fault, 2): holder×pause (2), waiter×pause (1)\n" +
		"cells planned but not struck (1): release-in-flight×lost-reply\n"
	if b.String() != want {
		t.Errorf("summary:\n%s\nwant:\n%s", b.String(), want)
	}
}

// Candidate seeds are distinct and the plan's own seed comes first.
func TestCandidates(t *testing.T) {
	cs := candidates(7)
	seen := map[int64]bool{}
	for _, c := range cs {
		seen[c] = true
	}
	if cs[0] != 7 || len(seen) != steerCandidates {
		t.Errorf("candidates(7) = %v", cs)
	}
}
