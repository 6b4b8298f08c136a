package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/locktest/locktest/nemesis"
)

// steerCandidates is how many seeds a nightly weighs for each random run:
// it plays the one whose schedule plans the most cells not yet struck.
const steerCandidates = 8

// steerStride separates a random run's candidate seeds, so that they do
// not meet the plan's other runs' (seed, seed+1, ...).
const steerStride = 1_000_003

// coverage is what a nightly's runs have struck, and what their schedules
// could strike: cells by key. Candidate schedules are drawn as on a system
// that offers every fault; offered are the families the runs' systems
// played, and only their cells count as missed.
type coverage struct {
	struck  map[string]nemesis.Cell
	planned map[string]nemesis.Cell
	offered map[string]bool
}

func newCoverage() *coverage {
	return &coverage{struck: map[string]nemesis.Cell{}, planned: map[string]nemesis.Cell{}, offered: map[string]bool{}}
}

// offer notes the families a run's system played.
func (cv *coverage) offer(families []string) {
	for _, f := range families {
		cv.offered[f] = true
	}
}

// add counts cells into m.
func add(m map[string]nemesis.Cell, cells []nemesis.Cell) {
	for _, c := range cells {
		k := c.Key()
		old := m[k]
		c.Count += old.Count
		m[k] = c
	}
}

// strike notes the cells a run struck.
func (cv *coverage) strike(cells []nemesis.Cell) { add(cv.struck, cells) }

// fresh counts the cells of planned not yet struck.
func (cv *coverage) fresh(planned []nemesis.Cell) int {
	n := 0
	for _, c := range planned {
		if _, ok := cv.struck[c.Key()]; !ok {
			n++
		}
	}
	return n
}

// steer picks, of the candidate seeds, the first whose schedule (planned
// says its cells) plans the most cells not yet struck, and notes every
// candidate's cells as ones the nightly could strike. A candidate whose
// schedule cannot be drawn is passed over; with none, the first.
func (cv *coverage) steer(candidates []int64, planned func(seed int64) ([]nemesis.Cell, error)) int64 {
	best, most := candidates[0], -1
	for _, s := range candidates {
		cells, err := planned(s)
		if err != nil {
			continue
		}
		add(cv.planned, cells)
		if n := cv.fresh(cells); n > most {
			best, most = s, n
		}
	}
	return best
}

// candidates are the seeds weighed for the random run planned with seed.
func candidates(seed int64) []int64 {
	out := make([]int64, steerCandidates)
	for i := range out {
		out[i] = seed + int64(i)*steerStride
	}
	return out
}

// write says which cells the runs struck (with how often) and which of
// those the schedules planned, of the families offered, were never struck.
func (cv *coverage) write(w io.Writer) {
	keys := slices.Sorted(maps.Keys(cv.struck))
	var struck []string
	for _, k := range keys {
		struck = append(struck, fmt.Sprintf("%s (%d)", k, cv.struck[k].Count))
	}
	var missed []string
	for _, k := range slices.Sorted(maps.Keys(cv.planned)) {
		if _, ok := cv.struck[k]; !ok && cv.offered[cv.planned[k].Fault] {
			missed = append(missed, k)
		}
	}
	fmt.Fprintf(w, "cells struck (lock state × fault, %d): %s\n", len(struck), orNone(struck))
	fmt.Fprintf(w, "cells planned but not struck (%d): %s\n", len(missed), orNone(missed))
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}
