package workload

import (
	"context"
	"errors"
	"sync"
	"time"
)

// errCrashed unwinds a client's cycle when a crash takes effect.
var errCrashed = errors.New("client crashed")

// control is a client's pause and crash switchboard. Pauses run on host time
// (they are the nemesis's, not the client's); a paused client notices them
// at its pause points, its keepalive loop before each send.
type control struct {
	mu     sync.Mutex
	resume chan struct{} // non-nil while paused; closed when the pause ends
	until  time.Time     // host time the current pause ends
	armed  time.Duration // a pause waiting for the client's next guarded write
	// crashed is closed when a crash is requested; it is replaced once the
	// crash has taken effect.
	crashed  chan struct{}
	crashing bool
	// since is when the current pause began; stopped sums the pauses
	// that ended (pausedTotal).
	since   time.Time
	stopped time.Duration
	// changed, if set, is called (without mu held) when a pause begins
	// and when it ends.
	changed func()
}

func newControl() *control { return &control{crashed: make(chan struct{})} }

// pause stops the world for d from now, or extends the current pause.
func (c *control) pause(d time.Duration) {
	c.mu.Lock()
	end := time.Now().Add(d)
	if c.resume != nil {
		if end.After(c.until) {
			c.until = end
		}
		c.mu.Unlock()
		return
	}
	ch := make(chan struct{})
	c.resume, c.until, c.since = ch, end, time.Now()
	var wake func()
	wake = func() {
		c.mu.Lock()
		if c.resume != ch {
			c.mu.Unlock()
			return
		}
		if left := time.Until(c.until); left > 0 {
			time.AfterFunc(left, wake)
			c.mu.Unlock()
			return
		}
		close(ch)
		c.resume = nil
		c.stopped += time.Since(c.since)
		changed := c.changed
		c.mu.Unlock()
		if changed != nil {
			changed()
		}
	}
	time.AfterFunc(d, wake)
	changed := c.changed
	c.mu.Unlock()
	if changed != nil {
		changed()
	}
}

// pausedTotal is how long the client has been paused in all (host time),
// the pause in force included.
func (c *control) pausedTotal() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.resume != nil {
		return c.stopped + time.Since(c.since)
	}
	return c.stopped
}

// arm makes the client's next guarded write pause for d right after its
// guard passes.
func (c *control) arm(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed = d
}

// fireArmed starts an armed pause, if any.
func (c *control) fireArmed() {
	c.mu.Lock()
	d := c.armed
	c.armed = 0
	c.mu.Unlock()
	if d > 0 {
		c.pause(d)
	}
}

// disarm cancels an armed pause, saying whether there was one, and says
// when the current pause ends (zero if none).
func (c *control) disarm() (bool, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	armed := c.armed > 0
	c.armed = 0
	if c.resume == nil {
		return armed, time.Time{}
	}
	return armed, c.until
}

func (c *control) paused() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.resume != nil
}

// crash requests a crash; it takes effect at the client's next pause point.
func (c *control) crash() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.crashing {
		c.crashing = true
		close(c.crashed)
	}
}

// crashState reports whether a crash is pending, and the channel closed
// when one is.
func (c *control) crashState() (bool, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.crashing, c.crashed
}

// crashDone rearms the switch after a crash has taken effect.
func (c *control) crashDone() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashing {
		c.crashing = false
		c.crashed = make(chan struct{})
	}
}

// step is a client's pause point: it blocks while the client is paused and
// returns errCrashed if a crash is pending, or ctx's error.
func (c *control) step(ctx context.Context) error {
	for {
		c.mu.Lock()
		crashing, resume, crashed := c.crashing, c.resume, c.crashed
		c.mu.Unlock()
		switch {
		case crashing:
			return errCrashed
		case resume == nil:
			return ctx.Err()
		}
		select {
		case <-resume:
		case <-crashed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitPaused is the keepalive loop's pause point: it blocks while the client
// is paused, or until ctx ends.
func (c *control) waitPaused(ctx context.Context) error {
	for {
		c.mu.Lock()
		resume := c.resume
		c.mu.Unlock()
		if resume == nil {
			return ctx.Err()
		}
		select {
		case <-resume:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
