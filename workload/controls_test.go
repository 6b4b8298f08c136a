package workload

import (
	"testing"
	"time"

	"github.com/locktest/locktest/histories"
)

// A hook on a release is never struck by the release in flight, whose reply
// is on its way already (a lost reply armed then would lose nothing): the
// next release fires it. An acquire in flight, a queued waiter's whose
// reply is its grant, is struck at once.
func TestInterceptInFlight(t *testing.T) {
	c := &client{}
	w := &Workload{byName: map[string]*client{"c0": c}}
	var fired []string
	c.sending(histories.Release)
	cancel, err := w.Intercept("c0", histories.Release, func() { fired = append(fired, "before") }, func(error) { fired = append(fired, "after") })
	if err != nil {
		t.Fatal(err)
	}
	c.answered(histories.Release, nil)
	if len(fired) != 0 {
		t.Fatalf("the release in flight fired the hook: %v", fired)
	}
	c.sending(histories.Release)
	c.answered(histories.Release, nil)
	if len(fired) != 2 || !cancel() {
		t.Fatalf("the next release fired %v, want before and after", fired)
	}

	fired = nil
	c.sending(histories.Acquire)
	if _, err := w.Intercept("c0", histories.Acquire, func() { fired = append(fired, "before") }, func(error) { fired = append(fired, "after") }); err != nil {
		t.Fatal(err)
	}
	if len(fired) != 1 {
		t.Fatalf("the acquire in flight did not fire the hook at once: %v", fired)
	}
	c.answered(histories.Acquire, nil)
	if len(fired) != 2 {
		t.Fatalf("the acquire's answer ran %v, want after too", fired)
	}
}

// Ahead finds a holder by the think time its section has left, however
// long ago it began; not one with too little left, nor one whose release
// is all that is left of its grant.
func TestAhead(t *testing.T) {
	now := time.Now()
	mid := &client{name: "c0", held: &holding{}, thinking: thinking{since: now.Add(-time.Second), length: 4 * time.Second}}
	late := &client{name: "c1", held: &holding{}, thinking: thinking{since: now.Add(-3 * time.Second), length: 4 * time.Second}}
	done := &client{name: "c2", held: &holding{}}
	w := &Workload{clients: []*client{late, done, mid}}
	if c, ok := w.Ahead(2500 * time.Millisecond); !ok || c != "c0" {
		t.Fatalf("Ahead(2.5s) = %q, %v; want c0, 3 s of its 4 s left", c, ok)
	}
	if c, ok := w.Ahead(3500 * time.Millisecond); ok {
		t.Fatalf("Ahead(3.5s) = %q; want none (c0 has about 3 s left)", c)
	}
}

// Newest is the waiter that began its Acquire last of those that have
// waited minWait; Waiter the one that began first.
func TestNewestWaiter(t *testing.T) {
	now := time.Now()
	w := &Workload{clients: []*client{
		{name: "c0", waiting: now.Add(-4 * time.Second)},
		{name: "c1", waiting: now.Add(-300 * time.Millisecond)},
		{name: "c2"}, // not waiting
		{name: "c3", waiting: now.Add(-time.Second)},
		{name: "c4", waiting: now}, // not yet queued
	}}
	if c, ok := w.Newest(20 * time.Millisecond); !ok || c != "c1" {
		t.Errorf("Newest = %q, %v; want c1", c, ok)
	}
	if c, ok := w.Waiter(20 * time.Millisecond); !ok || c != "c0" {
		t.Errorf("Waiter = %q, %v; want c0", c, ok)
	}
	if c, ok := w.Newest(time.Hour); ok {
		t.Errorf("Newest(1h) = %q, want none", c)
	}
}
