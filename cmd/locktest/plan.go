package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/resource"
)

// shard is a deterministic part K of N of a nightly plan.
type shard struct{ k, n int }

// parseShard reads --shard K/N (1 <= K <= N).
func parseShard(s string) (shard, error) {
	ks, ns, ok := strings.Cut(s, "/")
	k, err1 := strconv.Atoi(ks)
	n, err2 := strconv.Atoi(ns)
	if !ok || err1 != nil || err2 != nil || n < 1 || k < 1 || k > n {
		return shard{}, fmt.Errorf("--shard: want K/N with 1 <= K <= N, got %q", s)
	}
	return shard{k, n}, nil
}

// mine says whether the plan's i-th run is this shard's.
func (s shard) mine(i int) bool { return i%s.n == s.k-1 }

// planned is one run of a nightly plan: a scenario, or random faults with a
// seed.
type planned struct {
	Scenario string // "" for random faults
	Seed     int64
	Recipe   string
	Resource string
}

func (p planned) name() string {
	what := p.Scenario
	if what == "" {
		what = fmt.Sprintf("seed %d", p.Seed)
	}
	return fmt.Sprintf("%s %s %s", what, p.Recipe, p.Resource)
}

// nightlyPlan is the whole plan, every shard's: each scenario with the
// unfenced and the fenced resource for each recipe (a scenario about one
// recipe, with that one and those its expectations name, as the recipe that
// fixes its bug; one of a backend's, with the recipes of that backend, or its
// first; every upstream bug it reproduces, with the recipes that show it),
// then random-fault runs with seeds from first on,
// for as long as a budget lasts (the caller stops taking them). It is a
// function of its arguments, so every CI worker computes the same plan and
// runs its own part. A recipe that is not a built-in runs on backend (its
// name; "" the default).
func nightlyPlan(bs *backend.Set, recipes []string, backend string, seed int64, randomRuns int) []planned {
	var out []planned
	backendOf := func(r string) string {
		b, err := bs.For(r, backend)
		if _, _, builtin := bs.Builtin(r); builtin || err != nil {
			return bs.Of(r).Name
		}
		return b.Name
	}
	for _, sc := range bs.Catalog() {
		rs := recipes
		if r := sc.Recipes(); len(r) > 0 {
			rs = r // the scenario is about that recipe (and its fix)
		} else if sc.Backend != "" {
			rs = slices.DeleteFunc(slices.Clone(recipes), func(r string) bool { return backendOf(r) != sc.Backend })
			if len(rs) == 0 {
				b, _ := bs.Named(sc.Backend)
				rs = []string{b.Recipes[0].Name}
			}
		}
		for _, b := range sc.Bugs {
			for _, r := range b.Recipes {
				if !slices.Contains(rs, r) {
					rs = append(slices.Clone(rs), r)
				}
			}
		}
		for _, r := range rs {
			for _, res := range []resource.Mode{resource.Unfenced, resource.Fenced} {
				out = append(out, planned{Scenario: sc.Name, Seed: seed, Recipe: r, Resource: string(res)})
			}
		}
	}
	for i := range randomRuns {
		for _, r := range recipes {
			out = append(out, planned{Seed: seed + int64(i), Recipe: r, Resource: string(resource.Fenced)})
		}
	}
	return out
}

// runCost is how long a run of these many seconds of faults and quiet is
// expected to take at most, start to verdict: the clients' last operations
// may run to their timeout, and the cluster's start, the checks and the
// close take a few seconds more.
func runCost(faults, quiet, opTimeout time.Duration) time.Duration {
	return faults + quiet + opTimeout + 3*time.Second
}
