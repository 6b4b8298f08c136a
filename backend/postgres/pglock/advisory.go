package pglock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktest/locktest/lock"
)

// Advisory is pg-advisory (xact false) or pg-advisory-xact (xact true):
// each locker keeps one session over the client's link, the one its locks
// are held by (see the package comment).
func Advisory(xact bool) lock.Recipe {
	name := AdvisoryName
	if xact {
		name = XactName
	}
	return RecipeFunc(name, func(ctx context.Context, env Env) (lock.Locker, error) {
		c, err := env.Connect(ctx)
		if err != nil {
			return nil, err
		}
		if _, err := c.Exec(ctx, fmt.Sprintf("SET lock_timeout = %d", lockTimeout.Milliseconds())); err != nil {
			c.Close(context.Background())
			return nil, err
		}
		l := &advisory{env: env, xact: xact, c: c, pid: c.PgConn().PID(), done: make(chan struct{}), stop: make(chan struct{})}
		if xact {
			if l.tokens, err = env.pool(1); err != nil {
				c.Close(context.Background())
				return nil, err
			}
		}
		go l.keepalive()
		return l, nil
	})
}

type advisory struct {
	env  Env
	xact bool
	pid  uint32

	mu sync.Mutex // one statement at a time on c
	c  *pgx.Conn
	// tokens (pg-advisory-xact) is where a grant's token is taken, in a
	// statement of its own that commits: a nextval in the holder's open
	// transaction is not made durable until it commits, and a crash of the
	// server before that handed the same token out again (promise 1, seeds
	// 10 and 12 of a 20-seed sweep under --nemesis all).
	tokens *pgxpool.Pool

	done     chan struct{} // closed once the session is known gone
	doneOnce sync.Once
	stop     chan struct{} // closed to stop the keepalive
	stopOnce sync.Once
}

// keepalive speaks on the session every IdleTimeout/3 of the client's
// clock, unless a statement is in flight, so that the server does not end
// it for silence; a pause of the client stops it too. It closes done once
// the session is gone.
func (l *advisory) keepalive() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-l.stop:
		case <-l.done:
		}
		cancel()
	}()
	period := l.env.IdleTimeout / 3
	for {
		if err := l.env.Clock.Sleep(ctx, period); err != nil {
			return
		}
		if l.env.Paused != nil && l.env.Paused(ctx) != nil {
			return
		}
		if !l.mu.TryLock() {
			continue // a statement in flight: the session is not silent
		}
		// Patient: a keepalive that gives up closes the session, which
		// must be the server's to end when the link is cut.
		kctx, kcancel := l.env.Clock.WithTimeout(ctx, 2*l.env.IdleTimeout)
		_, err := lock.Call(kctx, func(ctx context.Context) (struct{}, error) {
			_, err := l.c.Exec(ctx, "SELECT 1")
			return struct{}{}, err
		})
		kcancel()
		l.mu.Unlock()
		if err != nil {
			l.check()
		}
	}
}

// check closes done if the session is gone (pgx closes a connection on a
// failure it cannot recover from).
func (l *advisory) check() {
	if l.c.IsClosed() {
		l.doneOnce.Do(func() { close(l.done) })
	}
}

// exec runs f on the session, one statement at a time, bounded by ctx.
func exec[T any](ctx context.Context, l *advisory, f func(ctx context.Context, c *pgx.Conn) (T, error)) (T, error) {
	v, err := lock.Call(ctx, func(ctx context.Context) (T, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		return f(ctx, l.c)
	})
	if err != nil {
		l.check()
	}
	return v, err
}

func (l *advisory) Acquire(ctx context.Context, name string) (lock.Held, error) {
	key := l.env.Prefix + name
	akey := AdvisoryKey(key)
	for {
		token, err := exec(ctx, l, func(ctx context.Context, c *pgx.Conn) (int64, error) {
			var token int64
			if !l.xact {
				err := c.QueryRow(ctx, "SELECT pg_advisory_lock($1)::text, nextval('locktest_fence')", akey).Scan(new(string), &token)
				return token, err
			}
			if _, err := c.Exec(ctx, "BEGIN"); err != nil {
				return 0, err
			}
			_, err := c.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", akey)
			if err == nil {
				// Taken while the lock is held, so that tokens grow with
				// the grants; a failure gives the lock back.
				if err = l.tokens.QueryRow(ctx, "SELECT nextval('locktest_fence')").Scan(&token); err != nil {
					err = fmt.Errorf("taking the token: %w", err)
				}
			}
			if err != nil {
				if _, rerr := c.Exec(ctx, "ROLLBACK"); rerr != nil {
					return 0, errors.Join(err, rerr)
				}
			}
			return token, err
		})
		switch {
		case err == nil:
			return &advisoryHeld{l: l, key: key, akey: akey, token: token}, nil
		case !notAcquired(err):
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %w (waited on the server)", lock.ErrNotAcquired, context.Cause(ctx))
		}
		if err := lock.RetryAfter(ctx, l.env.Clock, time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// PID is the session's backend process ID.
func (l *advisory) PID() uint32 { return l.pid }

// Done is closed once the session is known gone: the harness then makes a
// new locker.
func (l *advisory) Done() <-chan struct{} { return l.done }

// Orphan stops the keepalive and ends nothing, as a client that dies
// behind a link that keeps its connection open: the server ends the silent
// session after idle_session_timeout, and its locks with it.
func (l *advisory) Orphan() { l.stopOnce.Do(func() { close(l.stop) }) }

// Close ends the session, and its locks with it.
func (l *advisory) Close() error {
	l.Orphan()
	// After the statement in flight, if any: its context has ended, and
	// pgx's connection is not for two goroutines at once.
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tokens != nil {
		l.tokens.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return l.c.Close(ctx)
}

type advisoryHeld struct {
	l     *advisory
	key   string
	akey  int64
	token int64
}

func (h *advisoryHeld) Token() int64 { return h.token }
func (h *advisoryHeld) Key() string  { return h.key }
func (h *advisoryHeld) PID() uint32  { return h.l.pid }

// Release unlocks (pg-advisory) or commits (pg-advisory-xact). An unlock
// the server answers false found no such lock of the session's: it is
// not the holder's to release, and the outcome is left unknown.
func (h *advisoryHeld) Release(ctx context.Context) error {
	ok, err := exec(ctx, h.l, func(ctx context.Context, c *pgx.Conn) (bool, error) {
		if h.l.xact {
			_, err := c.Exec(ctx, "COMMIT")
			return err == nil, err
		}
		var ok bool
		err := c.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", h.akey).Scan(&ok)
		return ok, err
	})
	if err == nil && !ok {
		return errors.New("pg_advisory_unlock: the session held no such lock")
	}
	return err
}
