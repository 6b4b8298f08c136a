package redislock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"

	"github.com/locktest/locktest/lock"
)

// Redlock is the redlock recipe with a waiter's retry interval (of the
// client's clock): go-redsync's Mutex over every server of Conn.Servers,
// independent masters (five, for Redlock as specified), one redsync pool
// per server. A grant is one TryLock (SET NX PX on every master, granted
// with a majority within the TTL's validity); a waiter sleeps and tries
// again; a watchdog calls Extend every TTL/3; release is redsync's Unlock.
//
// Redlock has no fencing token. Token is taken after the grant, not with
// it: an INCR of Prefix+name+":fence" on every master at once, the highest
// count answered. It grows from one grant to the next only if no holder is
// delayed between its grant and its INCR and the masters that hold the
// highest count do not restart (they keep nothing on disk): a fenced
// resource cannot rely on it (the Builtin says NoFencingToken).
//
// redsync's own time arithmetic inside TryLock and Extend (the validity
// left after the round trip, less its clock drift allowance) reads the
// host clock, not the client's; the recipe's own decisions run on the
// client's.
func Redlock(interval time.Duration) lock.Recipe {
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	return RecipeFunc(RedlockName, func(ctx context.Context, env Env) (lock.Locker, error) {
		pools := make([]redsyncredis.Pool, len(env.Servers))
		for i, c := range env.Servers {
			pools[i] = goredis.NewPool(c)
		}
		lctx, cancel := context.WithCancel(context.Background())
		return &redlocker{env: env, interval: interval, rs: redsync.New(pools...), ctx: lctx, stop: cancel}, nil
	})
}

type redlocker struct {
	env      Env
	interval time.Duration
	rs       *redsync.Redsync
	// ctx ends when the locker closes, which stops its watchdogs.
	ctx  context.Context
	stop context.CancelFunc
}

func (l *redlocker) Acquire(ctx context.Context, name string) (lock.Held, error) {
	key := l.env.Prefix + name
	ttl := ttlOf(l.env)
	for {
		m := l.rs.NewMutex(key, redsync.WithExpiry(ttl), redsync.WithTries(1))
		began := l.env.Clock.Now()
		// TryLock bounds itself (each of its round trips to a twentieth of
		// the TTL, on a host deadline), so it is waited for, not abandoned
		// as call would.
		err := m.TryLockContext(ctx)
		if err == nil {
			return l.granted(ctx, m, began)
		}
		// TryLock failed and released what it took: nothing it did grants
		// the lock.
		if serr := lock.RetryAfter(ctx, l.env.Clock, l.interval); serr != nil {
			return nil, fmt.Errorf("%w; the last attempt: %v", serr, err)
		}
	}
}

// granted takes the grant's token and starts its watchdog. The watchdog
// extends through a Mutex of its own with the grant's value, so that it
// and Release never share a Mutex (redsync's is not safe for concurrent
// use).
func (l *redlocker) granted(ctx context.Context, m *redsync.Mutex, began time.Time) (lock.Held, error) {
	token, err := l.token(ctx, m.Name()+fenceSuffix)
	if err != nil {
		return nil, fmt.Errorf("took %s but not its token: %w", m.Name(), err)
	}
	h := &redlockHeld{m: m, token: token}
	ext := l.rs.NewMutex(m.Name(), redsync.WithExpiry(ttlOf(l.env)), redsync.WithValue(m.Value()))
	h.dog = startWatchdog(l.ctx, l.env.Clock, l.env.Paused, ttlOf(l.env), began, func(ctx context.Context) (bool, error) {
		ok, err := ext.ExtendContext(ctx)
		var taken *redsync.ErrTaken
		if !ok && errors.As(err, &taken) {
			// A majority holds another value or none: lost.
			return false, nil
		}
		return ok, err
	})
	return h, nil
}

// token INCRs key on every master at once and returns the highest count.
// Each INCR gets a twentieth of the TTL, as each of TryLock's round trips
// does, so that a paused master does not hold up the grant.
func (l *redlocker) token(ctx context.Context, key string) (int64, error) {
	ctx, cancel := l.env.Clock.WithTimeout(ctx, ttlOf(l.env)/20)
	defer cancel()
	var (
		mu      sync.Mutex
		highest int64
		errs    []error
		wg      sync.WaitGroup
	)
	for _, c := range l.env.Servers {
		wg.Go(func() {
			n, err := lock.Call(ctx, func(ctx context.Context) (int64, error) { return c.Incr(ctx, key).Result() })
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			highest = max(highest, n)
		})
	}
	wg.Wait()
	if highest == 0 {
		return 0, errors.Join(errs...)
	}
	return highest, nil
}

// Close stops the watchdogs of the grants not released and deletes
// nothing: like a client that dies, it leaves its keys to expire.
func (l *redlocker) Close() error {
	l.Orphan()
	return nil
}

// Orphan stops the watchdogs: a crashed client's keys expire.
func (l *redlocker) Orphan() { l.stop() }

type redlockHeld struct {
	m     *redsync.Mutex
	token int64
	dog   *watchdog
}

func (h *redlockHeld) Token() int64 { return h.token }

func (h *redlockHeld) Key() string   { return h.m.Name() }
func (h *redlockHeld) Value() string { return h.m.Value() }

// Done is closed once the watchdog has learned the lock is lost.
func (h *redlockHeld) Done() <-chan struct{} { return h.dog.Done() }

// Release unlocks the masters that still hold this grant's value. If no
// master failed to answer, what is not unlocked was not ours any more.
func (h *redlockHeld) Release(ctx context.Context) error {
	h.dog.halt()
	ok, err := lock.Call(ctx, h.m.UnlockContext)
	var unreachable *redsync.RedisError
	if !ok && (errors.As(err, &unreachable) || ctx.Err() != nil) {
		return err
	}
	return nil
}
