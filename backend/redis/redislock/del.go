package redislock

import (
	"context"
	"fmt"
	"time"

	"github.com/locktest/locktest/lock"
)

// Del is the redis-del recipe, broken on purpose: the lock of the incident,
// as found in many codebases. SET Prefix+name value NX EX ttl on
// Conn.Master, no watchdog, and release by a plain DEL of the key, whoever
// holds it now. A holder that outlives its TTL (a pause, a slow section)
// deletes the next holder's key, whose release deletes the one after's.
//
// Its token is an INCR of Prefix+name+":fence" sent after the SET
// succeeded, not with it: a holder paused between the two takes its token
// after the next holder took one, so tokens need not grow in the order of
// the grants and are no fencing tokens. If the INCR fails the client holds
// the lock without a token, and Acquire's error leaves the outcome unknown.
func Del(interval time.Duration) lock.Recipe {
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	return RecipeFunc(DelName, func(ctx context.Context, env Env) (lock.Locker, error) {
		return &del{env: env, interval: interval}, nil
	})
}

type del struct {
	env      Env
	interval time.Duration
}

func (l *del) Acquire(ctx context.Context, name string) (lock.Held, error) {
	key := l.env.Prefix + name
	value := newValue(l.env.Name)
	for {
		// SET key value EX ttl NX
		ok, err := lock.Call(ctx, func(ctx context.Context) (bool, error) {
			return l.env.Master.SetNX(ctx, key, value, ttlOf(l.env)).Result()
		})
		if err != nil {
			return nil, err
		}
		if ok {
			token, err := lock.Call(ctx, func(ctx context.Context) (int64, error) {
				return l.env.Master.Incr(ctx, key+fenceSuffix).Result()
			})
			if err != nil {
				return nil, fmt.Errorf("took %s but not its token: %w", key, err)
			}
			return &delHeld{env: l.env, key: key, value: value, token: token}, nil
		}
		if err := lock.RetryAfter(ctx, l.env.Clock, l.interval); err != nil {
			return nil, err
		}
	}
}

func (l *del) Close() error { return nil }

type delHeld struct {
	env        Env
	key, value string
	token      int64
}

func (h *delHeld) Token() int64 { return h.token }

func (h *delHeld) Key() string   { return h.key }
func (h *delHeld) Value() string { return h.value }

// Release deletes the key: the bug.
func (h *delHeld) Release(ctx context.Context) error {
	_, err := lock.Call(ctx, func(ctx context.Context) (int64, error) {
		return h.env.Master.Del(ctx, h.key).Result()
	})
	return err
}
