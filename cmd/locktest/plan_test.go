package main

import (
	"testing"

	"github.com/locktest/locktest/scenario"
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
	plan := nightlyPlan([]string{"mutex", "election"}, 100, 7)
	if want := len(scenario.Catalog)*2*2 + 7*2; len(plan) != want {
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
