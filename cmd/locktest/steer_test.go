package main

import (
	"flag"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/nemesis"
)

func mkCell(key string) nemesis.Cell {
	c, err := nemesis.ParseCells(key)
	if err != nil || len(c) != 1 {
		panic(key)
	}
	return c[0]
}

// A random run is steered toward the cells its recipe's system offers
// that no run on its backend has struck, in an order drawn from its seed;
// the summary names, per backend, the cells offered, struck and not
// struck, and each run's steering.
func TestCoverageSteers(t *testing.T) {
	cv := newCoverage()
	offered := []nemesis.Cell{mkCell("holder×pause"), mkCell("waiter×pause"), mkCell("leader×crash"), mkCell("release-in-flight×lost-reply")}
	cv.offer("mutex", "etcd", offered, nil)
	cv.offer("redlock", "redis", offered[:2], map[string]string{nemesis.StateWaiter: "one client"})
	cv.strike("etcd", []nemesis.Cell{{State: nemesis.StateHolder, Fault: "pause", Count: 2}, {State: nemesis.StateIdle, Fault: "slow", Count: 1}})

	w := cv.wanted("mutex", 1)
	if got := nemesis.CellKeys(w); len(w) != 3 || strings.Contains(got, "holder×pause") {
		t.Errorf("wanted by mutex: %s; want the three offered not struck", got)
	}
	if w[0] != mkCell("leader×crash") {
		t.Errorf("wanted by mutex: %s; want the crash, slowest to start and stop, first", nemesis.CellKeys(w))
	}
	if again := cv.wanted("mutex", 1); !slices.Equal(again, w) {
		t.Errorf("the same seed, another order: %v, %v", again, w)
	}
	orders := map[string]bool{}
	for seed := range int64(20) {
		orders[nemesis.CellKeys(cv.wanted("mutex", seed))] = true
	}
	if len(orders) < 2 {
		t.Errorf("20 seeds drew one order: %v", orders)
	}
	// holder×pause was struck on etcd, not on Redis.
	if got := cv.wanted("redlock", 1); len(got) != 2 {
		t.Errorf("wanted by redlock: %s, want both its cells", nemesis.CellKeys(got))
	}
	cv.strike("redis", offered[:2])
	if got := cv.wanted("redlock", 1); len(got) != 0 {
		t.Errorf("redlock's cells all struck, still wanted: %v", got)
	}
	cv.strike("zookeeper", []nemesis.Cell{mkCell("holder×isolate")}) // a scenario's
	cv.strike("", nil)                                               // a run that could not start
	cv.steer("seed 1 mutex fenced", "locktest run --seed 1 --steer leader×crash", []nemesis.Cell{mkCell("leader×crash")})
	cv.steer("seed 2 mutex fenced", "locktest run --seed 2", nil) // not steered: not listed
	var b strings.Builder
	cv.write(&b)
	want := "cells offered (lock state × fault, by the random runs' systems): 4 on etcd, 2 on redis\n" +
		"cells struck on etcd (2, 1 of them offered): holder×pause (2), idle×slow (1)\n" +
		"cells offered but not struck on etcd (3): leader×crash, release-in-flight×lost-reply, waiter×pause\n" +
		"cells struck on redis (2, 2 of them offered): holder×pause (0), waiter×pause (0)\n" +
		"cells offered but not struck on redis (0): none\n" +
		"cells not offered on redis, of states its runs never reach: waiter (one client)\n" +
		"cells struck on zookeeper (1, 0 of them offered): holder×isolate (0)\n" +
		"steered seed 1 mutex fenced toward leader×crash: locktest run --seed 1 --steer leader×crash\n"
	if b.String() != want {
		t.Errorf("summary:\n%s\nwant:\n%s", b.String(), want)
	}
}

// The random runs keep from the scenarios the runs it takes to steer a
// fault at every offered cell, as many as each run's schedule has room
// for, taking the recipes in turn but passing over one whose backend has
// all its cells struck while another has not, and one more; as many whole
// runs as fit in all but catalogShare of the budget.
func TestRunsToCover(t *testing.T) {
	cv := newCoverage()
	var mutex, redlock []nemesis.Cell
	for _, st := range []string{nemesis.StateHolder, nemesis.StateWaiter, nemesis.StateIdle, nemesis.StateMidSection} {
		for _, f := range []string{"pause", "isolate", "slow"} {
			mutex = append(mutex, nemesis.Cell{State: st, Fault: f})
		}
	}
	for _, st := range []string{nemesis.StateHolder, nemesis.StateWaiter, nemesis.StateMember} {
		redlock = append(redlock, nemesis.Cell{State: st, Fault: "crash"})
	}
	cv.offer("mutex", "etcd", mutex, nil)
	cv.offer("redlock", "redis", redlock, nil)
	room := 5
	var asked []string
	placed := func(r string, seed int64, steer []nemesis.Cell) []nemesis.Cell {
		asked = append(asked, r)
		return steer[:min(room, len(steer))]
	}
	// mutex: 12 cells, 5 a run; redlock's 3 in its first run, and its
	// second turn is passed over: its backend is covered, etcd is not.
	if n := cv.runsToCover([]string{"mutex", "redlock"}, 1, 100, placed); n != 4 || !slices.Equal(asked, []string{"mutex", "redlock", "mutex", "mutex"}) {
		t.Errorf("%d runs to cover (asked %v), want 4: mutex, redlock, mutex, mutex", n, asked)
	}
	if len(cv.struck) != 0 {
		t.Error("the estimate struck cells")
	}
	room = 0
	if n := cv.runsToCover([]string{"mutex"}, 1, 7, placed); n != 7 {
		t.Errorf("nothing placed: %d runs, want the limit 7", n)
	}
	cv.strike("etcd", mutex)
	cv.strike("redis", redlock)
	if n := cv.runsToCover([]string{"mutex", "redlock"}, 1, 7, placed); n != 0 {
		t.Errorf("all struck: %d runs, want 0", n)
	}
	if got := reserve(5, 30*time.Second, 10*time.Minute); got != 180*time.Second {
		t.Errorf("reserve of 5 runs: %s, want 6", got)
	}
	if got := reserve(0, 30*time.Second, 10*time.Minute); got != 0 {
		t.Errorf("reserve of no run: %s", got)
	}
	if got := reserve(50, 40*time.Second, 10*time.Minute); got != 520*time.Second {
		t.Errorf("reserve of 50 runs: %s, want the 13 runs that fit in nine tenths of the budget", got)
	}
	if got := reserve(3, 30*time.Second, 50*time.Second); got != 30*time.Second {
		t.Errorf("reserve of 3 runs in a budget of less than two: %s, want the one that fits", got)
	}
}

// A random run gives way when every cell its system offers is struck on
// its backend and another recipe's backend has some left; when none has,
// the random runs go on, unsteered.
func TestCoveredBackendGivesWay(t *testing.T) {
	cv := newCoverage()
	cv.offer("mutex", "etcd", []nemesis.Cell{mkCell("holder×pause"), mkCell("leader×crash")}, nil)
	cv.offer("election", "etcd", []nemesis.Cell{mkCell("holder×pause")}, nil)
	cv.offer("redlock", "redis", []nemesis.Cell{mkCell("holder×pause")}, nil)
	recipes := []string{"mutex", "election", "redlock"}
	cv.strike("redis", []nemesis.Cell{mkCell("holder×pause")})
	if !cv.skip("redlock", recipes) || cv.skip("mutex", recipes) {
		t.Errorf("redis covered, etcd not: skip redlock %v, mutex %v; want true, false", cv.skip("redlock", recipes), cv.skip("mutex", recipes))
	}
	cv.strike("etcd", []nemesis.Cell{mkCell("holder×pause")})
	// election's one cell is struck, but mutex, on the same backend, still wants leader×crash.
	if !cv.skip("election", recipes) || cv.skip("mutex", recipes) {
		t.Errorf("etcd's holder×pause struck: skip election %v, mutex %v; want true, false", cv.skip("election", recipes), cv.skip("mutex", recipes))
	}
	cv.strike("etcd", []nemesis.Cell{mkCell("leader×crash")})
	for _, r := range recipes {
		if cv.skip(r, recipes) {
			t.Errorf("everything struck: %s still skipped", r)
		}
	}
}

// A steered random run's recorded command names its seed and its cells:
// without its schedule file, the same command draws the same schedule.
func TestSteeredRunReplays(t *testing.T) {
	steer := []nemesis.Cell{mkCell("idle×pause"), mkCell("leader×crash"), mkCell("release-in-flight×lost-reply")}
	plan, _, err := nightlyOptions(ownBackends, planned{Seed: 9, Recipe: "mutex", Resource: "fenced"}, steered(map[string]string{}, steer))
	if err != nil {
		t.Fatal(err)
	}
	drawn, err := harness.DrawSchedule(plan.Options)
	if err != nil || drawn == nil || drawn.Entries[0].Params["cell"] != "idle×pause" {
		t.Fatalf("steered schedule: %v, %v", drawn, err)
	}
	args, _ := harness.Reproduce(plan.Options)
	if i := slices.Index(args, "--steer"); i < 0 || args[i+1] != nemesis.CellKeys(steer) {
		t.Fatalf("the command does not name the cells: %v", args)
	}
	i := slices.Index(args, "--schedule")
	args = slices.Delete(slices.Clone(args), i, i+2)
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	rf := addRunFlags(fs, ownBackends)
	if err := fs.Parse(args[1:]); err != nil {
		t.Fatal(err)
	}
	o, err := rf.options()
	if err != nil {
		t.Fatal(err)
	}
	again, err := harness.NewPlan(o)
	if err != nil {
		t.Fatal(err)
	}
	redrawn, err := harness.DrawSchedule(again.Options)
	if err != nil || !reflect.DeepEqual(redrawn, drawn) {
		t.Errorf("the command redraws another schedule (%v):\n%+v\nwant\n%+v", err, redrawn, drawn)
	}
}

// A state the run's workload never puts a client in offers no cell, and
// says why: nobody waits with one client, no holder has work ahead when
// no section thinks 200 ms.
func TestUnreachedStatesNotOffered(t *testing.T) {
	for _, tc := range []struct {
		given map[string]string
		gone  []string
	}{
		{map[string]string{}, nil},
		{map[string]string{"clients": "1"}, []string{nemesis.StateWaiter}},
		{map[string]string{"slow-share": "0"}, []string{nemesis.StateMidSection}},
		{map[string]string{"slow-share": "0", "think": "300ms"}, nil},
	} {
		plan, _, err := nightlyOptions(ownBackends, planned{Seed: 1, Recipe: "mutex", Resource: "fenced"}, tc.given)
		if err != nil {
			t.Fatal(err)
		}
		u := plan.Unreached()
		if got := slices.Sorted(maps.Keys(u)); !slices.Equal(got, tc.gone) {
			t.Errorf("%v: unreached %v, want %v", tc.given, u, tc.gone)
		}
		offered := plan.OfferedCells()
		if len(offered) == 0 {
			t.Fatalf("%v: no cell offered", tc.given)
		}
		for _, c := range offered {
			if _, ok := u[c.State]; ok {
				t.Errorf("%v: %s offered, its state never reached", tc.given, c.Key())
			}
		}
		if want := slices.ContainsFunc(offered, func(c nemesis.Cell) bool { return c.State == nemesis.StateWaiter }); want == slices.Contains(tc.gone, nemesis.StateWaiter) {
			t.Errorf("%v: waiter cells offered %v", tc.given, want)
		}
	}
}
