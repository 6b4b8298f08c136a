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
	plan := nightlyPlan([]string{"mutex", "election"}, "", 100, 7)
	want := 7 * 2
	for _, sc := range registry.Catalog() {
		if r := sc.Run.Recipe; r != "" {
			want += 2 // its own recipe only
			if !slices.Contains(plan, planned{Scenario: sc.Name, Seed: 100, Recipe: r, Resource: "unfenced"}) {
				t.Errorf("%s is not planned with its recipe %s", sc.Name, r)
			}
			continue
		}
		want += 2 * 2
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
