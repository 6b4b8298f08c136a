package redislock

import (
	"context"
	"sync"
	"time"

	"github.com/locktest/locktest/clock"
	"github.com/locktest/locktest/lock"
)

// renewFunc renews a grant's TTL: true if renewed, false if the lock was
// not the grant's any more. An error says neither.
type renewFunc func(ctx context.Context) (bool, error)

// watchdog keeps a grant alive while it is held, as Redisson's lock
// watchdog does: every TTL/3 of the client's clock it renews the TTL. Done
// closes once the client learns it lost the lock: a renewal found the lock
// not its own, or a whole TTL of the client's clock passed since the last
// renewal that succeeded began (renewals that fail or hang prove nothing
// either way, but the key cannot have outlived that). A client whose clock
// runs slow thus learns late, as a real one would.
type watchdog struct {
	done   chan struct{}
	stop   chan struct{}
	exited chan struct{}
	once   sync.Once
}

// startWatchdog starts renewing a grant of TTL ttl whose acquire began at
// granted (a time of clk). It runs until stop, or until parent ends (the
// locker closed).
func startWatchdog(parent context.Context, clk *clock.Clock, paused func(context.Context) error, ttl time.Duration, granted time.Time, renew renewFunc) *watchdog {
	w := &watchdog{done: make(chan struct{}), stop: make(chan struct{}), exited: make(chan struct{})}
	go w.run(parent, clk, paused, ttl, granted, renew)
	return w
}

func (w *watchdog) run(parent context.Context, clk *clock.Clock, paused func(context.Context) error, ttl time.Duration, last time.Time, renew renewFunc) {
	defer close(w.exited)
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	period := ttl / 3
	tick := clk.NewTimer(period)
	defer tick.Stop()
	expiry := clk.NewTimer(ttl - clk.Since(last))
	defer expiry.Stop()
	type result struct {
		began time.Time
		ok    bool
		err   error
	}
	// One renewal at a time: the next is due a period after this one
	// answers. A renewal still running when the watchdog stops finishes on
	// its own; its compare-and-renew cannot renew a later grant.
	results := make(chan result, 1)
	for {
		select {
		case <-w.stop:
			return
		case <-ctx.Done():
			return
		case <-expiry.C:
			close(w.done)
			return
		case <-tick.C:
			go func() {
				// A pause of the client stops its renewals too: the
				// next one goes out once it is over.
				if paused != nil {
					if err := paused(ctx); err != nil {
						results <- result{err: err}
						return
					}
				}
				began := clk.Now()
				rctx, rcancel := clk.WithTimeout(ctx, period)
				defer rcancel()
				ok, err := lock.Call(rctx, renew)
				results <- result{began, ok, err}
			}()
		case r := <-results:
			switch {
			case r.err != nil:
			case !r.ok:
				close(w.done)
				return
			default:
				expiry.Reset(ttl - clk.Since(r.began))
			}
			tick.Reset(period)
		}
	}
}

// Done is closed once the client has learned it lost the lock.
func (w *watchdog) Done() <-chan struct{} { return w.done }

// halt stops the renewals and waits until the watchdog has stopped.
func (w *watchdog) halt() {
	w.once.Do(func() { close(w.stop) })
	<-w.exited
}
