package main

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"

	"github.com/locktest/locktest/scenario"
)

func TestJUnitAndSummary(t *testing.T) {
	runs := []nightlyRun{
		{Name: "paused-holder mutex unfenced", Dir: "runs/a", Command: "locktest scenario run paused-holder --seed 1", Seconds: 15.2,
			Exit: 1, Failed: "On key \"lock\", the resource accepted a stale write.\nmore"},
		{Name: "etcd-22082 mutex-retry fenced", Dir: "runs/b", Command: "locktest scenario run etcd-22082 --seed 1 --resource fenced", Seconds: 14.8,
			Bugs: []scenario.Bug{{Ref: "etcd#22082", URL: "https://github.com/etcd-io/etcd/issues/22082", Seen: "etcd 3.6.16", Status: "open", Recipes: []string{"mutex-retry"}}}},
		{Name: "seed 7 mutex fenced", Dir: "runs/c", Command: "locktest run --seed 7", Seconds: 25, Exit: 2, Error: "contract unknown"},
		{Name: "seed 8 mutex fenced", Dir: "runs/d", Command: "locktest run --seed 8", Seconds: 31, Exit: 1, Failed: "contract: Promise 2",
			Shrink: "locktest shrink runs/d"},
	}
	var b bytes.Buffer
	if err := writeJUnit(&b, runs); err != nil {
		t.Fatal(err)
	}
	var got junitSuites
	if err := xml.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("JUnit does not parse: %v\n%s", err, b.String())
	}
	s := got.Suites[0]
	if s.Tests != 4 || s.Failures != 2 || s.Errors != 1 || s.Time != "86.000" {
		t.Errorf("suite %+v", s)
	}
	if f := s.Cases[0].Failure; f == nil || f.Message != "On key \"lock\", the resource accepted a stale write." || !strings.Contains(s.Cases[0].SystemOut, "runs/a") {
		t.Errorf("failing case %+v", s.Cases[0])
	}
	if s.Cases[1].Failure != nil || s.Cases[1].Error != nil {
		t.Errorf("passing case %+v", s.Cases[1])
	}
	if p := s.Cases[1].Properties; p == nil || len(p.Property) != 1 || p.Property[0] != (junitProperty{"upstream-bug",
		"etcd#22082 (open), seen in etcd 3.6.16, with --recipe mutex-retry: https://github.com/etcd-io/etcd/issues/22082"}) {
		t.Errorf("the bug's case has properties %+v", p)
	}
	if s.Cases[0].Properties != nil {
		t.Errorf("a case without bugs has properties %+v", s.Cases[0].Properties)
	}
	// A random-fault failure names the command that shrinks it; a
	// scenario's does not (its schedule is scripted).
	if f := s.Cases[3].Failure; f == nil || !strings.HasSuffix(f.Text, "locktest shrink runs/d") || !strings.Contains(s.Cases[3].SystemOut, "shrink: locktest shrink runs/d") {
		t.Errorf("shrinkable failure %+v", s.Cases[3])
	}
	if strings.Contains(s.Cases[0].Failure.Text+s.Cases[0].SystemOut, "shrink") {
		t.Errorf("a scenario's failure names a shrink command: %+v", s.Cases[0])
	}
	b.Reset()
	if err := writeSummary(&b, runs); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{"4 runs, 3 failed", "Shrink: `locktest shrink runs/d`", "| paused-holder mutex unfenced | **failed** | 1 |", "Reproduce: `locktest run --seed 7`"} {
		if !strings.Contains(md, want) {
			t.Errorf("summary lacks %q:\n%s", want, md)
		}
	}
}
