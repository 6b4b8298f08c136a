// Package clock gives each locktest client a clock of its own: the host's
// clock seen through an offset, a rate and jumps that a nemesis changes
// during a run (Jepsen's clock nemesis: bump, strobe, rate). Everything in a
// client that decides by time reads this clock and waits on its timers, so a
// client whose clock runs slow sleeps, times out and renews its lease late in
// real time, as a real one would.
//
// A Clock's time is
//
//	local = anchorLocal + rate × (host − anchorHost)
//
// where host is the host's monotonic clock and the anchors are re-taken
// whenever the rate changes; an offset (Bump) shifts anchorLocal. Timers
// wait for a duration of the clock's own time: at rate 0.5 a one-second
// timer takes two host seconds. When the clock changes, pending timers are
// re-armed: a bump forward fires those that have come due at once, a bump
// back or a slower rate delays them.
//
// Only time read through the Clock is skewed. Go's own timers, and anything
// in the process that reads time.Now directly (the embedded etcd members'
// lessors among them), keep the host's time.
package clock

import (
	"context"
	"math"
	"sync"
	"time"
)

// Clock is a skewable clock. It is safe for concurrent use. The zero value
// is not usable; call New.
type Clock struct {
	mu          sync.Mutex
	anchorHost  time.Time // host reading with monotonic part
	anchorLocal time.Time // local time at anchorHost, wall only
	rate        float64
	offset      time.Duration // sum of bumps since the last Reset, for Offset
	timers      map[*Timer]struct{}
	changed     chan struct{} // closed at the next change (Changed)
}

// New returns a clock that reads as the host's clock, at rate 1.
func New() *Clock {
	now := time.Now()
	return &Clock{anchorHost: now, anchorLocal: now.Round(0), rate: 1, timers: map[*Timer]struct{}{}, changed: make(chan struct{})}
}

// Changed returns a channel that is closed at the clock's next change (a
// bump, a rate, a reset): what follows the clock from outside it (the
// faked clock of a lock in another process) reads it again then.
func (c *Clock) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// atLocked is the clock's time at host time h. c.mu is held.
func (c *Clock) atLocked(h time.Time) time.Time {
	el := h.Sub(c.anchorHost)
	if c.rate == 1 {
		return c.anchorLocal.Add(el)
	}
	return c.anchorLocal.Add(time.Duration(float64(el) * c.rate))
}

// Now returns the clock's current time. It carries no monotonic reading;
// differences between a Clock's times are differences of its own time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.atLocked(time.Now())
}

// Since returns the clock's time elapsed since t (a time from Now).
func (c *Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Until returns the clock's time left until t (a time from Now).
func (c *Clock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// Rate returns the clock's rate: clock seconds per host second.
func (c *Clock) Rate() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rate
}

// Offset returns the sum of the bumps since New or the last Reset. (The
// clock's distance from the host's clock also grows with a rate other
// than 1; Skew reports that.)
func (c *Clock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset
}

// Skew returns how far the clock is ahead of the host's clock (negative:
// behind).
func (c *Clock) Skew() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := time.Now()
	return c.atLocked(h).Sub(h.Round(0))
}

// Bump jumps the clock by d (forward if positive, back if negative). Pending
// timers that come due fire at once.
func (c *Clock) Bump(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.anchorLocal = c.anchorLocal.Add(d)
	c.offset += d
	c.rearmLocked()
}

// SetRate makes the clock run at rate r from now on: r clock seconds per host
// second. A rate of 0 stops the clock (its timers wait until the rate
// changes or a bump makes them due); negative rates count as 0. NaN is
// ignored.
func (c *Clock) SetRate(r float64) {
	if math.IsNaN(r) {
		return
	}
	r = max(r, 0)
	c.mu.Lock()
	defer c.mu.Unlock()
	h := time.Now()
	c.anchorLocal = c.atLocked(h)
	c.anchorHost = h
	c.rate = r
	c.rearmLocked()
}

// Reset puts the clock back on the host's time at rate 1.
func (c *Clock) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := time.Now()
	c.anchorHost, c.anchorLocal, c.rate, c.offset = h, h.Round(0), 1, 0
	c.rearmLocked()
}

// rearmLocked recomputes every pending timer's host wait after a change,
// and tells those waiting on Changed.
func (c *Clock) rearmLocked() {
	now := c.atLocked(time.Now())
	for t := range c.timers {
		t.armLocked(now)
	}
	close(c.changed)
	c.changed = make(chan struct{})
}

// hostWaitLocked is the host time until the clock reaches deadline, or false
// if it never will at the current rate.
func (c *Clock) hostWaitLocked(now, deadline time.Time) (time.Duration, bool) {
	left := deadline.Sub(now)
	if left <= 0 {
		return 0, true
	}
	if c.rate <= 0 {
		return 0, false
	}
	// Round up: a host timer that fires a hair early only re-arms.
	return time.Duration(math.Ceil(float64(left) / c.rate)), true
}

// Timer fires once the clock has advanced by its duration (or the clock is
// bumped past its deadline). Use NewTimer, AfterFunc or After.
type Timer struct {
	// C receives the clock's time when the timer fires (NewTimer only).
	C <-chan time.Time

	c        *Clock
	ch       chan time.Time
	f        func()
	deadline time.Time
	host     *time.Timer
	gen      uint64 // bumps with every arming; stale host timers check it
	active   bool
}

// NewTimer returns a timer that sends the clock's time on its channel after
// d of the clock's time.
func (c *Clock) NewTimer(d time.Duration) *Timer {
	ch := make(chan time.Time, 1)
	t := &Timer{C: ch, c: c, ch: ch}
	c.mu.Lock()
	defer c.mu.Unlock()
	t.startLocked(d)
	return t
}

// AfterFunc calls f in its own goroutine after d of the clock's time.
func (c *Clock) AfterFunc(d time.Duration, f func()) *Timer {
	t := &Timer{c: c, f: f}
	c.mu.Lock()
	defer c.mu.Unlock()
	t.startLocked(d)
	return t
}

// After returns a channel that receives the clock's time after d of the
// clock's time.
func (c *Clock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C }

// Sleep waits for d of the clock's time, or until ctx ends (returning its
// error).
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WithTimeout returns a context that is cancelled after d of the clock's
// time, with context.DeadlineExceeded as its cause (context.Cause), and its
// cancel function. Its Err is context.Canceled either way (the deadline is
// not a host time, so the context has no Deadline).
func (c *Clock) WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	t := c.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return ctx, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

func (t *Timer) startLocked(d time.Duration) {
	now := t.c.atLocked(time.Now())
	t.deadline = now.Add(d)
	t.active = true
	t.c.timers[t] = struct{}{}
	t.armLocked(now)
}

// armLocked (re)starts the host timer for the current clock state, or fires
// the timer if it is due. The clock's mu is held.
func (t *Timer) armLocked(now time.Time) {
	if !t.active {
		return
	}
	t.gen++
	if t.host != nil {
		t.host.Stop()
		t.host = nil
	}
	wait, ok := t.c.hostWaitLocked(now, t.deadline)
	switch {
	case !ok:
		// Stopped clock: wait for a change.
	case wait <= 0:
		t.fireLocked(now)
	default:
		gen := t.gen
		t.host = time.AfterFunc(wait, func() { t.check(gen) })
	}
}

// check runs when a host timer fires.
func (t *Timer) check(gen uint64) {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if !t.active || gen != t.gen {
		return
	}
	t.armLocked(t.c.atLocked(time.Now()))
}

func (t *Timer) fireLocked(now time.Time) {
	t.active = false
	delete(t.c.timers, t)
	if t.f != nil {
		go t.f()
		return
	}
	select {
	case t.ch <- now:
	default:
	}
}

// Stop prevents the timer from firing. It reports whether it stopped the
// timer (false if it had fired or been stopped already). As with Go 1.23+
// timers, a value already sent on C is not drained; Reset drains it.
func (t *Timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.stopLocked()
}

func (t *Timer) stopLocked() bool {
	was := t.active
	t.active = false
	t.gen++
	if t.host != nil {
		t.host.Stop()
		t.host = nil
	}
	delete(t.c.timers, t)
	return was
}

// Reset re-arms the timer to fire after d of the clock's time, discarding
// any unreceived value on C. It reports whether the timer had been active.
func (t *Timer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.stopLocked()
	if t.ch != nil {
		select {
		case <-t.ch:
		default:
		}
	}
	t.startLocked(d)
	return was
}

// Deadline returns the clock time at which the timer fires (or fired).
func (t *Timer) Deadline() time.Time {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.deadline
}
