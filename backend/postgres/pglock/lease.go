package pglock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktest/locktest/clock"
	"github.com/locktest/locktest/lock"
)

// pollInterval is how long a lease waiter sleeps before it tries again.
const pollInterval = 50 * time.Millisecond

// Lease is pg-lease (clientClock false) or pg-lease-client-clock, broken
// on purpose (clientClock true): a lease row per lock, through a pool of
// sessions over the client's link (see the package comment).
func Lease(clientClock bool) lock.Recipe {
	name := LeaseName
	if clientClock {
		name = ClientClockName
	}
	return RecipeFunc(name, func(_ context.Context, env Env) (lock.Locker, error) {
		p, err := env.pool(2)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		return &lease{env: env, clientClock: clientClock, p: p, ctx: ctx, stop: cancel}, nil
	})
}

type lease struct {
	env         Env
	clientClock bool
	p           *pgxpool.Pool
	// ctx ends when the locker closes, which stops its watchdogs.
	ctx  context.Context
	stop context.CancelFunc
}

// now is the time the lease's expiry is written and compared in: the
// server's (nil: clock_timestamp()), or, broken, the client's.
func (l *lease) now() any {
	if l.clientClock {
		return l.env.Clock.Now()
	}
	return nil
}

// The statements; a renewal renews only a lease not yet expired, so that
// the expiry the observer sees stands. $3 is the TTL in milliseconds, $4 the client's time or
// NULL for the server's.
const (
	leaseAcquire = `INSERT INTO locktest_lease AS l (name, holder, expires, fence)
VALUES ($1, $2, coalesce($4::timestamptz, clock_timestamp()) + $3 * interval '1 millisecond', 1)
ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires = excluded.expires, fence = l.fence + 1
WHERE l.expires < coalesce($4::timestamptz, clock_timestamp())
RETURNING fence`
	leaseRenew = `UPDATE locktest_lease SET expires = coalesce($4::timestamptz, clock_timestamp()) + $3 * interval '1 millisecond'
WHERE name = $1 AND holder = $2 AND expires >= coalesce($4::timestamptz, clock_timestamp())`
	// A release ends the lease and keeps the row, whose fence the next
	// grant bumps: a deleted row would start it over at 1.
	leaseRelease = `UPDATE locktest_lease SET expires = '-infinity' WHERE name = $1 AND holder = $2`
)

func (l *lease) Acquire(ctx context.Context, name string) (lock.Held, error) {
	h := &leaseHeld{l: l, key: l.env.Prefix + name, holder: newValue(l.env.Name)}
	ttl := ttlOf(l.env).Milliseconds()
	for {
		began := l.env.Clock.Now()
		fence, err := lock.Call(ctx, func(ctx context.Context) (int64, error) {
			var fence int64
			err := l.p.QueryRow(ctx, leaseAcquire, h.key, h.holder, ttl, l.now()).Scan(&fence)
			if errors.Is(err, pgx.ErrNoRows) {
				return 0, nil
			}
			return fence, err
		})
		if err != nil {
			return nil, err
		}
		if fence > 0 {
			h.token = fence
			h.dog = startWatchdog(l.ctx, l.env.Clock, l.env.Paused, ttlOf(l.env), began, h.renew)
			return h, nil
		}
		if err := lock.RetryAfter(ctx, l.env.Clock, pollInterval); err != nil {
			return nil, err
		}
	}
}

// Close stops the watchdogs of the grants not released and deletes
// nothing: like a client that dies, it leaves its rows to expire.
func (l *lease) Close() error {
	l.Orphan()
	l.p.Close()
	return nil
}

// Orphan stops the watchdogs, deleting nothing: a crashed client's lease
// rows expire.
func (l *lease) Orphan() { l.stop() }

type leaseHeld struct {
	l           *lease
	key, holder string
	token       int64
	dog         *watchdog
}

func (h *leaseHeld) Token() int64 { return h.token }
func (h *leaseHeld) Key() string  { return h.key }
func (h *leaseHeld) Leased()      {}

// Done is closed once the watchdog has learned the lease is lost.
func (h *leaseHeld) Done() <-chan struct{} { return h.dog.Done() }

func (h *leaseHeld) renew(ctx context.Context) (bool, error) {
	tag, err := h.l.p.Exec(ctx, leaseRenew, h.key, h.holder, ttlOf(h.l.env).Milliseconds(), h.l.now())
	return tag.RowsAffected() == 1, err
}

// Release ends the lease if it is still this grant's.
func (h *leaseHeld) Release(ctx context.Context) error {
	h.dog.halt()
	_, err := lock.Call(ctx, func(ctx context.Context) (struct{}, error) {
		_, err := h.l.p.Exec(ctx, leaseRelease, h.key, h.holder)
		return struct{}{}, err
	})
	if err != nil {
		return fmt.Errorf("releasing the lease: %w", err)
	}
	return nil
}

// watchdog renews a grant every TTL/3 of the client's clock while it is
// held. Done closes once the client learns it lost the lease: a renewal
// found the row not its own, or a whole TTL of the client's clock passed
// since the last renewal that succeeded began.
type watchdog struct {
	done   chan struct{}
	stop   chan struct{}
	exited chan struct{}
	once   sync.Once
}

func startWatchdog(parent context.Context, clk *clock.Clock, paused func(context.Context) error, ttl time.Duration, granted time.Time, renew func(context.Context) (bool, error)) *watchdog {
	w := &watchdog{done: make(chan struct{}), stop: make(chan struct{}), exited: make(chan struct{})}
	go w.run(parent, clk, paused, ttl, granted, renew)
	return w
}

func (w *watchdog) run(parent context.Context, clk *clock.Clock, paused func(context.Context) error, ttl time.Duration, last time.Time, renew func(context.Context) (bool, error)) {
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

// Done is closed once the client has learned it lost the lease.
func (w *watchdog) Done() <-chan struct{} { return w.done }

// halt stops the renewals and waits until the watchdog has stopped.
func (w *watchdog) halt() {
	w.once.Do(func() { close(w.stop) })
	<-w.exited
}
