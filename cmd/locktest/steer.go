package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/nemesis"
)

// steerStream is the PCG stream of the order in which a random run's
// steered cells are drawn from its seed.
const steerStream = 0x7374656572

// catalogShare is the share of a nightly's budget that the scenarios keep
// however many offered cells are left to strike: the catalog finds the
// bugs someone documented, the random runs the others, and what a short
// nightly strikes is the random runs' doing (three backends offer 88
// cells, which take six 60-second runs as their schedules pack them; half
// of ten minutes held three).
const catalogShare = 0.1

// coverage is what a nightly's runs have struck, on each backend, and what
// its random runs' systems offer: cells by key. A random run is steered
// toward the cells its system offers that no run on its backend has struck
// yet (a cell struck on ZooKeeper says nothing of etcd).
type coverage struct {
	struck    map[string]map[string]nemesis.Cell // by backend
	offered   map[string][]nemesis.Cell          // by recipe
	unreached map[string]map[string]string       // by backend: states its runs' workload never reaches, and why
	backendOf map[string]string                  // a recipe's
	steered   []steeredRun
}

// steeredRun is a random run and the cells it was steered toward.
type steeredRun struct {
	name, command string
	steer         []nemesis.Cell
}

func newCoverage() *coverage {
	return &coverage{struck: map[string]map[string]nemesis.Cell{}, offered: map[string][]nemesis.Cell{},
		unreached: map[string]map[string]string{}, backendOf: map[string]string{}}
}

// offer notes the cells the system of recipe's random runs, on backend,
// offers, and the client states their workload never reaches, with why
// (their cells are not offered: harness.Plan.Unreached).
func (cv *coverage) offer(recipe, backend string, cells []nemesis.Cell, unreached map[string]string) {
	cv.offered[recipe], cv.backendOf[recipe] = cells, backend
	if len(unreached) > 0 {
		cv.unreached[backend] = unreached
	}
}

// strike notes the cells a run on backend struck (a run that could not
// be carried out has none, and no backend).
func (cv *coverage) strike(backend string, cells []nemesis.Cell) {
	if len(cells) == 0 {
		return
	}
	m := cv.struck[backend]
	if m == nil {
		m = map[string]nemesis.Cell{}
		cv.struck[backend] = m
	}
	for _, c := range cells {
		k := c.Key()
		c.Count += m[k].Count
		m[k] = c
	}
}

// unstruck are the cells recipe's system offers that no run on its
// backend has struck.
func (cv *coverage) unstruck(recipe string) []nemesis.Cell {
	var out []nemesis.Cell
	struck := cv.struck[cv.backendOf[recipe]]
	for _, c := range cv.offered[recipe] {
		if _, ok := struck[c.Key()]; !ok {
			out = append(out, nemesis.Cell{State: c.State, Fault: c.Fault})
		}
	}
	return out
}

// pending says whether the system of one of recipes offers a cell not yet
// struck on its backend.
func (cv *coverage) pending(recipes []string) bool {
	return slices.ContainsFunc(recipes, func(r string) bool { return len(cv.unstruck(r)) > 0 })
}

// skip says whether the random run of recipe gives way to the others':
// every cell its system offers is struck on its backend, and some of
// theirs are not. A run on a backend already covered strikes no cell that
// counts, and a run of a backend that still has some does.
func (cv *coverage) skip(recipe string, recipes []string) bool {
	return len(cv.unstruck(recipe)) == 0 && cv.pending(recipes)
}

// wanted are recipe's unstruck cells in an order drawn from seed, those of
// the families slowest to start and stop (a member rejoining, a crashed
// member's restart) first: a random run with seed is steered toward them,
// and its schedule places each that still fits in what is left of the run
// (nemesis.Generate), as a bin is packed largest first; placed last, the
// slow ones were the ones a run had no room for, run after run (a nightly
// of three backends struck none of its 15 crash cells).
func (cv *coverage) wanted(recipe string, seed int64) []nemesis.Cell {
	out := cv.unstruck(recipe)
	rng := rand.New(rand.NewPCG(uint64(seed), steerStream))
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	slices.SortStableFunc(out, func(a, b nemesis.Cell) int { return cmp.Compare(nemesis.Settle(b.Fault), nemesis.Settle(a.Fault)) })
	return out
}

// runsToCover is how many random runs, taking recipes in turn from seed
// on (and skipping those skip passes over, as the nightly does), it would
// take to steer a fault at every offered cell not yet struck, if each
// struck the cells placed says its schedule has room for (given the cells
// it is steered toward); at most limit.
func (cv *coverage) runsToCover(recipes []string, seed int64, limit int, placed func(recipe string, seed int64, steer []nemesis.Cell) []nemesis.Cell) int {
	sim := &coverage{struck: map[string]map[string]nemesis.Cell{}, offered: cv.offered, backendOf: cv.backendOf}
	for b, m := range cv.struck {
		sim.struck[b] = maps.Clone(m)
	}
	runs := 0
	for n := 0; runs < limit; n++ {
		if !sim.pending(recipes) {
			return runs
		}
		r := recipes[n%len(recipes)]
		if sim.skip(r, recipes) {
			continue
		}
		s := seed + int64(n/len(recipes))
		got := placed(r, s, sim.wanted(r, s))
		if len(got) == 0 {
			return limit // steering places nothing: no number of runs covers it
		}
		sim.strike(cv.backendOf[r], got)
		runs++
	}
	return limit
}

// reserve is the time the random runs keep from the scenarios: enough
// runs of cost each to steer a fault at every offered cell not yet struck,
// and one more for the faults that find no client in their state (an idle
// one) or that the run's end cuts off (a nightly reserving the estimate
// alone, 3 runs, left 4 of 35 cells); as many whole runs as fit in
// catalogShare's complement of the budget.
func reserve(runs int, cost, budget time.Duration) time.Duration {
	if runs > 0 {
		runs++
	}
	fit := int(float64(budget) * (1 - catalogShare) / float64(cost))
	return time.Duration(min(runs, fit)) * cost
}

// steer records that the run called name, replayed by command, was
// steered toward cells.
func (cv *coverage) steer(name, command string, cells []nemesis.Cell) {
	if len(cells) > 0 {
		cv.steered = append(cv.steered, steeredRun{name, command, cells})
	}
}

// write says, for each backend, which cells the random runs' systems
// offer, which the runs struck (with how often; a cell no random run's
// system offers may be struck by a scenario's), and which offered cells
// none struck; and how each steered run was steered.
func (cv *coverage) write(w io.Writer) {
	offered := map[string]map[string]bool{} // by backend
	for r, cells := range cv.offered {
		b := cv.backendOf[r]
		if offered[b] == nil {
			offered[b] = map[string]bool{}
		}
		for _, c := range cells {
			offered[b][c.Key()] = true
		}
	}
	var counts []string
	for _, b := range slices.Sorted(maps.Keys(offered)) {
		counts = append(counts, fmt.Sprintf("%d on %s", len(offered[b]), b))
	}
	fmt.Fprintf(w, "cells offered (lock state × fault, by the random runs' systems): %s\n", orNone(counts))
	backends := slices.Collect(maps.Keys(offered))
	for b := range cv.struck {
		if offered[b] == nil {
			backends = append(backends, b)
		}
	}
	slices.Sort(backends)
	for _, b := range backends {
		var struck, missed []string
		hit := 0
		for _, k := range slices.Sorted(maps.Keys(cv.struck[b])) {
			struck = append(struck, fmt.Sprintf("%s (%d)", k, cv.struck[b][k].Count))
			if offered[b][k] {
				hit++
			}
		}
		fmt.Fprintf(w, "cells struck on %s (%d, %d of them offered): %s\n", b, len(struck), hit, orNone(struck))
		if offered[b] == nil {
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(offered[b])) {
			if _, ok := cv.struck[b][k]; !ok {
				missed = append(missed, k)
			}
		}
		fmt.Fprintf(w, "cells offered but not struck on %s (%d): %s\n", b, len(missed), orNone(missed))
		if u := cv.unreached[b]; len(u) > 0 {
			var why []string
			for _, st := range slices.Sorted(maps.Keys(u)) {
				why = append(why, fmt.Sprintf("%s (%s)", st, u[st]))
			}
			fmt.Fprintf(w, "cells not offered on %s, of states its runs never reach: %s\n", b, strings.Join(why, ", "))
		}
	}
	for _, s := range cv.steered {
		fmt.Fprintf(w, "steered %s toward %s: %s\n", s.name, nemesis.CellKeys(s.steer), s.command)
	}
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}
