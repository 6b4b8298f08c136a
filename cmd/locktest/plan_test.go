package main

import (
	"slices"
	"testing"

	"github.com/locktest/locktest/backend/registry"
)

func TestParseShard(t *testing.T) {
	for _, bad := range []string{"0/2", "3/2", "x", "1/0", "1-2", "/", "1/x"} {
		if _, err := parseShard(bad); err == nil {
			t.Errorf("--shard %q accepted", bad)
		}
	}
	if s, err := parseShard("2/3"); err != nil || s != (shard{2, 3}) {
		t.Errorf("2/3: %v %v", s, err)
	}
}

// Shards are disjoint and together the whole plan.
func TestShardsSplitThePlan(t *testing.T) {
	plan := nightlyPlan(ownBackends, []string{"mutex", "election"}, "", 100, 7)
	want := 7 * 2
	for _, sc := range registry.Backends().Catalog() {
		rs := sc.Recipes() // its own recipe, not the command line's, and those it expects of, as its fix
		if len(rs) == 0 {
			rs = []string{"mutex", "election"}
		}
		for _, b := range sc.Bugs {
			rs = append(rs, b.Recipes...) // every bug with the recipe that shows it
		}
		slices.Sort(rs)
		rs = slices.Compact(rs)
		want += 2 * len(rs)
		for _, r := range rs {
			if !slices.Contains(plan, planned{Scenario: sc.Name, Seed: 100, Recipe: r, Resource: "unfenced"}) {
				t.Errorf("%s is not planned with recipe %s", sc.Name, r)
			}
		}
	}
	for _, p := range []planned{{"etcd-22082", 100, "mutex-retry-owned", "fenced"}, {"election-phantom", 100, "election-checked", "fenced"},
		{"waiter-expiry", 100, "mutex-3.4", "fenced"}, {"zk-ghost-node", 100, "zk-unprotected", "unfenced"}, {"zk-ghost-node", 100, "zk-lock", "fenced"}} {
		if !slices.Contains(plan, p) {
			t.Errorf("%s is not planned", p.name())
		}
	}
	if len(plan) != want {
		t.Fatalf("plan of %d runs, want %d", len(plan), want)
	}
	for _, n := range []int{1, 2, 3, 5} {
		seen := make([]int, len(plan))
		for k := 1; k <= n; k++ {
			for i := range plan {
				if (shard{k, n}).mine(i) {
					seen[i]++
				}
			}
		}
		for i, c := range seen {
			if c != 1 {
				t.Errorf("N=%d: run %d (%s) in %d shards", n, i, plan[i].name(), c)
			}
		}
	}
}
