package redislock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktest/locktest/lock"
)

// The redis-setnx scripts. KEYS[1] is the lock key, KEYS[2] its fencing
// counter; ARGV[1] the grant's value, ARGV[2] the TTL in milliseconds.
var (
	// acquireScript takes the lock and its token in one step, so that
	// tokens grow in the order of the grants: 0 if the lock is taken.
	acquireScript = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0`)
	// renewScript extends the TTL if the lock is still this grant's.
	renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`)
	// releaseScript deletes the lock if it is still this grant's.
	releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)
)

// SetNX is the redis-setnx recipe with a waiter's retry interval (of the
// client's clock): the lock is the key Prefix+name on Conn.Master, set
// with NX and a TTL in a script that also INCRs the counter
// Prefix+name+":fence", whose new value is the token; a watchdog renews
// the TTL every TTL/3 while the lock is held; release deletes the key if it
// is still this grant's.
//
// The token grows with every grant only while the counter lives: a master
// that restarts empty, or a failover to a replica that had not yet
// received the latest INCR, starts it over lower, and a fenced resource
// then rejects every later grant.
func SetNX(interval time.Duration) lock.Recipe {
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	return RecipeFunc(SetNXName, func(ctx context.Context, env Env) (lock.Locker, error) {
		return newSetNX(env, interval), nil
	})
}

type setNX struct {
	env      Env
	interval time.Duration
	// ctx ends when the locker closes, which stops its watchdogs.
	ctx  context.Context
	stop context.CancelFunc
}

func newSetNX(env Env, interval time.Duration) *setNX {
	ctx, cancel := context.WithCancel(context.Background())
	return &setNX{env: env, interval: interval, ctx: ctx, stop: cancel}
}

func (l *setNX) Acquire(ctx context.Context, name string) (lock.Held, error) {
	h := &setNXHeld{env: l.env, key: l.env.Prefix + name, value: newValue(l.env.Name)}
	ttl := ttlOf(l.env)
	for {
		began := l.env.Clock.Now()
		token, err := lock.Call(ctx, func(ctx context.Context) (int64, error) {
			return acquireScript.Run(ctx, l.env.Master, []string{h.key, h.key + fenceSuffix}, h.value, ttl.Milliseconds()).Int64()
		})
		if err != nil {
			return nil, err
		}
		if token > 0 {
			h.token = token
			h.dog = startWatchdog(l.ctx, l.env.Clock, l.env.Paused, ttl, began, h.renew)
			return h, nil
		}
		if err := lock.RetryAfter(ctx, l.env.Clock, l.interval); err != nil {
			return nil, err
		}
	}
}

// Close stops the watchdogs of the grants not released and deletes
// nothing: like a client that dies, it leaves its keys to expire.
func (l *setNX) Close() error {
	l.Orphan()
	return nil
}

// Orphan stops the watchdogs: a crashed client's keys expire.
func (l *setNX) Orphan() { l.stop() }

type setNXHeld struct {
	env        Env
	key, value string
	token      int64
	dog        *watchdog
}

func (h *setNXHeld) Token() int64 { return h.token }

func (h *setNXHeld) Key() string   { return h.key }
func (h *setNXHeld) Value() string { return h.value }

// Done is closed once the watchdog has learned the lock is lost.
func (h *setNXHeld) Done() <-chan struct{} { return h.dog.Done() }

func (h *setNXHeld) renew(ctx context.Context) (bool, error) {
	n, err := renewScript.Run(ctx, h.env.Master, []string{h.key}, h.value, ttlOf(h.env).Milliseconds()).Int64()
	return n == 1, err
}

// Release deletes the lock key if it is still this grant's; if not there
// is nothing of ours to release.
func (h *setNXHeld) Release(ctx context.Context) error {
	h.dog.halt()
	_, err := lock.Call(ctx, func(ctx context.Context) (int64, error) {
		return releaseScript.Run(ctx, h.env.Master, []string{h.key}, h.value).Int64()
	})
	return err
}
