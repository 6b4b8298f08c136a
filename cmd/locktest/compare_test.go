package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/locktest/locktest/internal/fakebackend"
	"github.com/locktest/locktest/nemesis"
)

// compare runs a recipe of each of two backends under one schedule, here
// the two fakes (the CLI's own logic: it runs beside TestRuns's real
// runs): the fake's run leaves out the member pauses its system cannot
// carry out, and the table says so; its other faults are the pausing
// fake's, at the same times, on its members by index; the row of a system
// with server processes has their CPU per acquisition, the other none.
// That real backends differ so (Redis has no leases) is their prototypes'
// (TestReferencePages, TestRedisBadInput); that a Redis run measures its
// servers' CPU and an embedded etcd none, redisRun's and TestRunEndToEnd's.
func testCompareAcrossBackends(t *testing.T) {
	out := t.TempDir()
	// Seed 6 draws a member pause (m1) among its client pauses.
	code, stdout, stderr := runMainOn(t, fakebackend.BothSet, "compare", "--recipes", "mem-mutex-pausing,mem-mutex", "--nemesis", "pause",
		"--nemesis-interval", "300ms", "--fault-durations", "pause=500ms-1s", "--time", "4s", "--quiet", "1s",
		"--seed", "6", "--out", out)
	if code == exitUnknown {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	tables, _ := filepath.Glob(filepath.Join(out, "compare-*.json"))
	if len(tables) != 1 {
		t.Fatalf("tables: %v", tables)
	}
	b, err := os.ReadFile(tables[0])
	if err != nil {
		t.Fatal(err)
	}
	var rows []compareRow
	if err := json.Unmarshal(b, &rows); err != nil || len(rows) != 2 {
		t.Fatalf("%d rows, %v", len(rows), err)
	}
	pausing, fake := rows[0], rows[1]
	if pausing.Backend != "fake-pausing" || fake.Backend != "fake" {
		t.Fatalf("backends %q and %q", pausing.Backend, fake.Backend)
	}
	if len(pausing.Dropped) != 0 || len(fake.Dropped) == 0 || fake.Faults+len(fake.Dropped) != pausing.Faults {
		t.Errorf("fake-pausing ran %d faults, dropped %v; fake ran %d, dropped %v", pausing.Faults, pausing.Dropped, fake.Faults, fake.Dropped)
	}
	for _, k := range fake.Dropped {
		if k != nemesis.PauseMember {
			t.Errorf("fake dropped %s", k)
		}
	}
	if !strings.Contains(stdout, "mem-mutex (fake) could not carry out") {
		t.Errorf("the table does not say what was dropped:\n%s", stdout)
	}
	// The faults the fake's run kept are the pausing fake's, at the same
	// times.
	read := func(dir string) nemesis.Schedule {
		s, err := nemesis.ReadFile(filepath.Join(dir, "schedule.json"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// A member is named by its backend (the fake's m0 is the pausing
	// fake's p0): compared by its index.
	byIndex := func(es []nemesis.Entry) []nemesis.Entry {
		for i, e := range es {
			if len(e.Target) > 1 && (e.Target[0] == 'm' || e.Target[0] == 'p') && strings.Trim(e.Target[1:], "0123456789") == "" {
				es[i].Target = "member " + e.Target[1:]
			}
		}
		return es
	}
	var kept []nemesis.Entry
	for _, e := range read(pausing.Dir).Entries {
		if e.Fault != nemesis.PauseMember {
			kept = append(kept, e)
		}
	}
	if got := byIndex(read(fake.Dir).Entries); !reflect.DeepEqual(got, byIndex(kept)) {
		t.Errorf("the fake run's schedule %+v, want the pausing fake's without its member pauses %+v", got, kept)
	}
	if fake.ServerCPUPerAcq != nil || pausing.ServerCPUPerAcq == nil || pausing.CPUPerAcq <= 0 {
		t.Errorf("server CPU per acquisition: fake %v, fake-pausing %v (client %v)", fake.ServerCPUPerAcq, pausing.ServerCPUPerAcq, pausing.CPUPerAcq)
	}
	if pausing.P70 < pausing.P50 || pausing.P90 < pausing.P70 {
		t.Errorf("percentiles out of order: %v %v %v", pausing.P50, pausing.P70, pausing.P90)
	}
}
