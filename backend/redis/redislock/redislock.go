// Package redislock is the Redis backend of package lock: the connection a
// Redis recipe gets (the client's go-redis clients, one per server, and one
// that follows the master), a watchdog that renews a grant on the client's
// clock, and the built-in Redis recipes, one file each.
//
// The built-in recipes (Builtins) are listed in docs/reference/recipes.md,
// which `locktest docs` writes from them.
//
// Every recipe runs its own time decisions (poll interval, renewal period,
// when a silent lock must be lost) on env.Clock, so clock faults act on
// them.
package redislock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/locktest/locktest/lock"
)

// Conn is lock.Env.Conn for a Redis recipe: one client's connections to
// the servers of a run.
type Conn struct {
	// Servers has a client of every server, in server order, each over the
	// client's own link to it.
	Servers []*redis.Client
	// Master is where a recipe of a single Redis sends its commands: with
	// Sentinel, a client that asks Sentinel for the master and follows it
	// through a failover; without, Servers[0].
	Master *redis.Client
}

// DialConfig says how one client reaches the servers.
type DialConfig struct {
	// Servers are the addresses of the client's links to every server, in
	// server order (redisserver's Endpoints).
	Servers []string
	// Sentinels, when set, are the Sentinels' own addresses
	// (redisserver's Sentinels' Addr), dialled with Dialer, and Master
	// follows the master Sentinel names MasterName.
	Sentinels  []string
	MasterName string
	// Dialer dials the addresses Sentinel hands out over the client's own
	// links (redisserver's Dialer).
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Dial makes a client's Conn. Its go-redis clients connect lazily.
//
// They are go-redis's defaults but for two things. No command is retried
// (MaxRetries -1): go-redis would resend a command whose reply was lost,
// and an acquire that did take the lock would then read as taken; every
// failure is the recipe's, an unknown outcome for the harness. And a
// context's deadline bounds a command (ContextTimeoutEnabled).
func Dial(cfg DialConfig) (*Conn, error) {
	if len(cfg.Servers) == 0 {
		return nil, errors.New("redislock: no servers to dial")
	}
	c := &Conn{}
	for _, addr := range cfg.Servers {
		o := options()
		o.Addr = addr
		c.Servers = append(c.Servers, redis.NewClient(o))
	}
	c.Master = c.Servers[0]
	if len(cfg.Sentinels) > 0 {
		o := options()
		c.Master = redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:            cfg.MasterName,
			SentinelAddrs:         cfg.Sentinels,
			Dialer:                cfg.Dialer,
			MaxRetries:            o.MaxRetries,
			ContextTimeoutEnabled: o.ContextTimeoutEnabled,
			DisableIdentity:       o.DisableIdentity,
		})
	}
	return c, nil
}

func options() *redis.Options {
	return &redis.Options{
		MaxRetries:            -1,
		ContextTimeoutEnabled: true,
		// CLIENT SETINFO and maintenance notifications are newer than
		// Redis 7.0, which would refuse them on every connection.
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
}

// Close closes every client.
func (c *Conn) Close() error {
	var errs []error
	for _, s := range c.Servers {
		errs = append(errs, s.Close())
	}
	if c.Master != c.Servers[0] {
		errs = append(errs, c.Master.Close())
	}
	return errors.Join(errs...)
}

// Env is what a Redis recipe gets for one client.
type Env struct {
	lock.Env
	// Conn is lock.Env.Conn.
	*Conn
}

// RecipeFunc makes a lock.Recipe of a name and a function of a Redis Env;
// it refuses a connection that is not a *Conn.
func RecipeFunc(name string, newLocker func(ctx context.Context, env Env) (lock.Locker, error)) lock.Recipe {
	return lock.RecipeFunc(name, func(ctx context.Context, env lock.Env) (lock.Locker, error) {
		c, ok := env.Conn.(*Conn)
		if !ok {
			return nil, fmt.Errorf("recipe %s needs a *redislock.Conn, got %T", name, env.Conn)
		}
		return newLocker(ctx, Env{Env: env, Conn: c})
	})
}

// Valued is implemented by a Held that tells the lock key its grant set
// and the value it set it to, which no other grant has: Redis's keyspace
// events say only that a key was deleted, so the harness attributes a
// deletion to the grant whose value the key held (the server's truth for
// the contract check).
type Valued interface {
	lock.Keyed
	Value() string
}

// Built-in recipe names.
const (
	SetNXName   = "redis-setnx"
	RedlockName = "redlock"
	DelName     = "redis-del"
)

// DefaultPollInterval is how long a waiter sleeps before it tries again.
const DefaultPollInterval = 50 * time.Millisecond

// Builtins are the built-in Redis recipes, the correct ones first. The
// single-Redis recipes (redis-setnx, redis-del) use Conn.Master, a Single
// or Replicated deployment; redlock uses every server of Conn.Servers, an
// Independent(5) one.
var Builtins = []lock.Builtin{
	{Name: SetNXName, Doc: "`SET key value NX PX ttl` in a Lua script that also INCRs the lock's fencing counter (as Redisson's fenced lock does); compare-and-delete release; a watchdog renews the TTL every TTL/3 on the client's clock; waiters poll every 50 ms. Its tokens grow only while the counter lives: a Redis that crashes and restarts empty (the crash fault, so `--nemesis all`) starts it over at 1, and `contract` is rightly invalid (promise 1, tokens grow; a fenced resource rejects every grant until the counter is back above the last token it accepted).", New: func() lock.Recipe { return SetNX(DefaultPollInterval) }},
	{Name: RedlockName, Doc: "go-redsync's Redlock over 5 independent masters, its Extend the watchdog. No fencing token: its token is a counter taken after the grant, which a fenced resource cannot rely on.", New: func() lock.Recipe { return Redlock(DefaultPollInterval) }, NoFencingToken: true, Majority: true},
	{Name: DelName, Doc: "broken on purpose, the flash-sale incident's lock: `SET key value NX EX ttl`, no watchdog, release by a plain `DEL` whoever holds the key; its token is an INCR after the grant.", New: func() lock.Recipe { return Del(DefaultPollInterval) }, Broken: true, NoFencingToken: true},
}

// fenceSuffix names a lock's counter: key+fenceSuffix. It has no TTL, so
// it outlives the lock key (and an emulated clock jump), but not a restart
// of its server, which has nothing on disk.
const fenceSuffix = ":fence"

// newValue is a grant's own value of the lock key: the client's name, for
// whoever reads the key, and random bytes, so no other grant has it.
func newValue(client string) string {
	var b [8]byte
	rand.Read(b[:])
	return client + ":" + hex.EncodeToString(b[:])
}

func ttlOf(env Env) time.Duration { return time.Duration(env.TTL) * time.Second }
