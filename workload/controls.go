package workload

import (
	"fmt"
	"time"

	"github.com/locktest/locktest/histories"
)

// The controls a nemesis drives the clients with (nemesis.Clients): who
// holds, waits or enters a section, pauses, clock faults, crashes, and hooks
// on a client's next operation.

// Names returns the clients' names, "c0", "c1", ...
func (w *Workload) Names() []string {
	names := make([]string, len(w.clients))
	for i, c := range w.clients {
		names[i] = c.name
	}
	return names
}

// Holder returns the client that believes it holds lock key (any lock if key
// is ""): one whose acquire succeeded and whose release has not completed,
// whether or not its session has ended since. If several believe so (a lease
// expired under one of them), it returns the one holding the newest grant,
// with that grant's token.
func (w *Workload) Holder(key string) (string, int64, bool) {
	best, tok := "", int64(-1)
	for _, c := range w.clients {
		c.mu.Lock()
		h := c.held
		c.mu.Unlock()
		if h != nil && (key == "" || h.key == key) && h.token > tok {
			best, tok = c.name, h.token
		}
	}
	return best, tok, best != ""
}

// Entering returns a holder that began, within the last within, a critical
// section that will think between min and max on its clock: a holder with
// that much work ahead of it. It is how a fault aims at a section it can
// harm, as a failpoint in the client would.
func (w *Workload) Entering(min, max, within time.Duration) (string, bool) {
	since := time.Now().Add(-within)
	for _, c := range w.clients {
		c.mu.Lock()
		t, held := c.thinking, c.held != nil
		c.mu.Unlock()
		if held && !t.since.IsZero() && t.since.After(since) && t.length >= min && (max <= 0 || t.length <= max) {
			return c.name, true
		}
	}
	return "", false
}

// Ahead returns a holder whose critical section has at least min of its
// think time still ahead (host time since it began counted against the
// length it draws on its clock): one begun a while ago serves a fault
// that needs work ahead as well as one entering now, and is there at
// once, where the next long section may be seconds away.
func (w *Workload) Ahead(min time.Duration) (string, bool) {
	now := time.Now()
	for _, c := range w.clients {
		c.mu.Lock()
		t, held := c.thinking, c.held != nil
		c.mu.Unlock()
		if held && !t.since.IsZero() && t.length-now.Sub(t.since) >= min {
			return c.name, true
		}
	}
	return "", false
}

// Waiter returns the client that has waited longest in Acquire, if one has
// waited at least minWait (long enough to be queued behind a holder rather
// than about to be granted at once).
func (w *Workload) Waiter(minWait time.Duration) (string, bool) {
	best, since := "", time.Now().Add(-minWait)
	for _, c := range w.clients {
		c.mu.Lock()
		t := c.waiting
		c.mu.Unlock()
		if !t.IsZero() && !t.After(since) {
			best, since = c.name, t
		}
	}
	return best, best != ""
}

// Newest returns the client that began waiting in Acquire last of those
// that have waited at least minWait: the one furthest from its acquire's
// timeout.
func (w *Workload) Newest(minWait time.Duration) (string, bool) {
	best, since := "", time.Time{}
	limit := time.Now().Add(-minWait)
	for _, c := range w.clients {
		c.mu.Lock()
		t := c.waiting
		c.mu.Unlock()
		if !t.IsZero() && !t.After(limit) && t.After(since) {
			best, since = c.name, t
		}
	}
	return best, best != ""
}

// Before returns the client whose node is just before client's newest in
// its lock's queue, as the server's truth has it ("" when client's node
// heads the queue, or its owner is not known), and whether client has a
// node in a queue the observer knows (a Queuer's).
func (w *Workload) Before(client string) (string, bool) {
	q, ok := w.obs.(Queuer)
	if !ok {
		return "", false
	}
	for _, l := range w.cfg.Locks {
		owners := q.Queue(l)
		for i := len(owners) - 1; i >= 0; i-- {
			if owners[i] != client {
				continue
			}
			if i == 0 {
				return "", true
			}
			return owners[i-1], true
		}
	}
	return "", false
}

// Disarm cancels a pause armed for client's next write, saying whether
// there was one, and says when the client's current pause ends (zero if it
// is not paused).
func (w *Workload) Disarm(client string) (bool, time.Time) {
	c, ok := w.byName[client]
	if !ok {
		return false, time.Time{}
	}
	return c.ctl.disarm()
}

// Role says what client is doing now: "holder" (it believes it holds a
// lock), "waiter" (it is in Acquire) or "idle".
func (w *Workload) Role(client string) string {
	c, ok := w.byName[client]
	if !ok {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.held != nil:
		return "holder"
	case !c.waiting.IsZero():
		return "waiter"
	}
	return "idle"
}

// Paused says whether client is paused now (a pause of the nemesis in
// force; an armed one has not begun).
func (w *Workload) Paused(client string) bool {
	c, ok := w.byName[client]
	return ok && c.ctl.paused()
}

// Pause stops client's world for d of host time: its own goroutine blocks at
// its next pause point (before each operation, after its think time, between
// its guard and its write) and its keepalive loop stops sending, until d has
// passed since the pause began; operations already in flight complete. With
// beforeWrite the pause is armed instead and begins when the client next
// passes its guard, right before the write. Pause returns at once; a pause
// while paused extends it.
func (w *Workload) Pause(client string, d time.Duration, beforeWrite bool) error {
	c, err := w.client(client)
	if err != nil {
		return err
	}
	if d <= 0 {
		return fmt.Errorf("workload: pause of %v: must be positive", d)
	}
	if beforeWrite {
		c.ctl.arm(d)
	} else {
		c.ctl.pause(d)
	}
	return nil
}

// BumpClock jumps client's clock by d.
func (w *Workload) BumpClock(client string, d time.Duration) {
	if c, ok := w.byName[client]; ok {
		c.clock.Bump(d)
	}
}

// SetClockRate makes client's clock run at rate (1 normal, 0.5 half speed).
func (w *Workload) SetClockRate(client string, rate float64) {
	if c, ok := w.byName[client]; ok {
		c.clock.SetRate(rate)
	}
}

// ResetClock puts client's clock back on host time at rate 1.
func (w *Workload) ResetClock(client string) {
	if c, ok := w.byName[client]; ok {
		c.clock.Reset()
	}
}

// Crash crashes client at its next pause point (at once if it is paused or
// thinking): the operation in flight, if any, is recorded as info whatever
// its result, its session is orphaned (keepalives stop, the lease is not
// revoked, so a lock key it holds stays until the lease expires), and it goes
// on as a new process with a new session.
func (w *Workload) Crash(client string) error {
	c, err := w.client(client)
	if err != nil {
		return err
	}
	c.ctl.crash()
	return nil
}

// Lease returns the lease (or session) of client's current locker, as the
// history writes it, or, for a recipe without one, the lease of the grant
// it holds, if its backend can tell.
func (w *Workload) Lease(client string) (string, bool) {
	c, ok := w.byName[client]
	if !ok {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.locker != nil && c.locker.lease != "" {
		return c.locker.lease, true
	}
	if c.held != nil && c.held.claim.Lease != "" {
		return c.held.claim.Lease, true
	}
	return "", false
}

func (w *Workload) client(name string) (*client, error) {
	c, ok := w.byName[name]
	if !ok {
		return nil, fmt.Errorf("workload: no client %q", name)
	}
	return c, nil
}

// Intercept arms a hook on client's next operation op (histories.Acquire
// or histories.Release; histories.SectionEnd: the end of its current or
// next critical section, before its release is invoked), or on an acquire
// in flight (a queued waiter's, whose reply is its grant, still to come; a
// release in flight has its
// reply on the way, so the next release is struck): before runs just
// before the client sends it (on the client's goroutine; at once, here, for
// an acquire in flight, whose request is already sent), and after runs on the client's
// goroutine once the operation returned, with its error (nil: it
// succeeded), before the client goes on. It is how a fault strikes exactly
// one operation, as a failpoint in the client would: a lost reply holds the
// client's links just before its request goes out, and keeps the client
// until they are whole again. Cancel disarms the hook unless before has
// run, and reports whether it had. A later Intercept on the same client
// replaces an unfired one.
func (w *Workload) Intercept(client, op string, before func(), after func(error)) (cancel func() (fired bool), err error) {
	c, err := w.client(client)
	if err != nil {
		return nil, err
	}
	if op != histories.Acquire && op != histories.Release && op != histories.SectionEnd {
		return nil, fmt.Errorf("workload: intercept of %q: want %s, %s or %s", op, histories.Acquire, histories.Release, histories.SectionEnd)
	}
	ic := &intercept{op: op, before: before, after: after}
	c.mu.Lock()
	inFlight := c.inFlight == op && op == histories.Acquire
	ic.fired = inFlight
	c.intercept = ic
	c.mu.Unlock()
	if inFlight {
		before()
	}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.intercept == ic && !ic.fired {
			c.intercept = nil
		}
		return ic.fired
	}, nil
}
