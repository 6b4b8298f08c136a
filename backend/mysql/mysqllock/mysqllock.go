// Package mysqllock is the MySQL (MariaDB) backend of package lock: the
// connection a MySQL recipe gets (the address of the client's own link to
// the server), and the built-in recipe:
//
//   - mysql-get-lock: GET_LOCK on one session the locker keeps for it, in
//     the statement that also takes NEXTVAL of a sequence: the token,
//     taken while the lock is held, grows with every grant; RELEASE_LOCK
//     its release. The lock lasts as long as the server believes the
//     session lives; the locker speaks every IdleTimeout/3 to keep it (the
//     server ends a silent session after wait_timeout), and a holder cut
//     off or paused past it loses its lock without learning it.
//
// And broken on purpose, the incident's lock (Combodo/iTop pull request
// 209, GET_LOCK silently released after wait_timeout):
//
//   - mysql-get-lock-idle: mysql-get-lock without the keepalive: a holder
//     whose critical section outlasts wait_timeout loses its session, and
//     its lock, with no fault at all, and never learns it.
package mysqllock

import (
	"context"
	"crypto/sha1"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/locktest/locktest/backend/mysql/mysqlserver"
	"github.com/locktest/locktest/lock"
)

// Conn is lock.Env.Conn for a MySQL recipe: how one client reaches the
// server.
type Conn struct {
	// Addr is the client's own link to the server ("host:port").
	Addr string
	// IdleTimeout is the server's wait_timeout.
	IdleTimeout time.Duration
}

// Env is what a MySQL recipe gets for one client.
type Env struct {
	lock.Env
	*Conn
}

// RecipeFunc makes a lock.Recipe of a name and a function of a MySQL Env.
func RecipeFunc(name string, newLocker func(ctx context.Context, env Env) (lock.Locker, error)) lock.Recipe {
	return lock.RecipeFunc(name, func(ctx context.Context, env lock.Env) (lock.Locker, error) {
		c, ok := env.Conn.(*Conn)
		if !ok {
			return nil, fmt.Errorf("recipe %s needs a *mysqllock.Conn, got %T", name, env.Conn)
		}
		return newLocker(ctx, Env{Env: env, Conn: c})
	})
}

// Sessioned is implemented by a Held whose lock its session holds: ID is
// the session's connection ID, which IS_USED_LOCK names and the server's
// log notes when it ends the session.
type Sessioned interface {
	lock.Keyed
	ID() int64
}

// The built-in recipes' names.
const (
	GetLockName = "mysql-get-lock"
	IdleName    = "mysql-get-lock-idle"
)

// Builtins are the built-in MySQL recipes, the correct one first.
var Builtins = []lock.Builtin{
	{Name: GetLockName, Doc: "`GET_LOCK(name, 0.5)` on one session the locker keeps alive, asked again until the operation's timeout, released with `RELEASE_LOCK`; the token is `NEXTVAL` of a MariaDB sequence in the same statement.", New: func() lock.Recipe { return GetLock(true) }},
	{Name: IdleName, Doc: "broken on purpose: `mysql-get-lock` without the keepalive: a holder silent for longer than `wait_timeout` loses its session, and its lock, with no fault (Combodo/iTop pull request 209).", New: func() lock.Recipe { return GetLock(false) }, Broken: true},
}

// Schema is what the recipe needs on the server: its database and the
// fencing sequence.
var Schema = []string{"CREATE DATABASE IF NOT EXISTS locktest", "CREATE SEQUENCE IF NOT EXISTS locktest.fence"}

// LockName is GET_LOCK's name of a lock key: the key, or its SHA-1 when
// longer than the 64 characters a name may have.
func LockName(key string) string {
	if len(key) <= 64 {
		return key
	}
	h := sha1.Sum([]byte(key))
	return hex.EncodeToString(h[:])
}

// waitSeconds bounds each wait of GET_LOCK on the server: the waiter then
// holds nothing and asks again, so that its context rarely ends with a
// statement in flight.
const waitSeconds = 0.5

// GetLock is mysql-get-lock, or without its keepalive (keepalive false)
// mysql-get-lock-idle.
func GetLock(keepalive bool) lock.Recipe {
	name := GetLockName
	if !keepalive {
		name = IdleName
	}
	return RecipeFunc(name, func(ctx context.Context, env Env) (lock.Locker, error) {
		mysqlserver.Quiet()
		c := mysql.NewConfig()
		c.User, c.Net, c.Addr, c.DBName = "root", "tcp", env.Addr, "locktest"
		c.Timeout = 2 * time.Second
		conn, err := mysql.NewConnector(c)
		if err != nil {
			return nil, err
		}
		db := sql.OpenDB(conn)
		db.SetMaxOpenConns(1)
		sc, err := db.Conn(ctx)
		if err != nil {
			db.Close()
			return nil, err
		}
		l := &getLock{env: env, db: db, c: sc, done: make(chan struct{}), stop: make(chan struct{})}
		if err := sc.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&l.id); err != nil {
			l.Close()
			return nil, err
		}
		if keepalive {
			go l.keepalive()
		}
		return l, nil
	})
}

type getLock struct {
	env Env
	db  *sql.DB
	id  int64

	mu sync.Mutex // one statement at a time on c
	c  *sql.Conn

	done     chan struct{}
	doneOnce sync.Once
	stop     chan struct{}
	stopOnce sync.Once
}

// keepalive pings the session every IdleTimeout/3 of the client's clock
// unless a statement is in flight; a pause of the client stops it. It
// closes done once the session is gone.
func (l *getLock) keepalive() {
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
			continue
		}
		// Patient: a keepalive that gives up closes the session, which
		// must be the server's to end when the link is cut.
		kctx, kcancel := l.env.Clock.WithTimeout(ctx, 2*l.env.IdleTimeout)
		_, err := lock.Call(kctx, func(ctx context.Context) (struct{}, error) {
			return struct{}{}, l.c.PingContext(ctx)
		})
		kcancel()
		l.mu.Unlock()
		l.check(err)
	}
}

// check closes done if err is not the server's answer: the driver drops
// a session whose statement failed otherwise (a broken link, a context
// that ended mid-statement).
func (l *getLock) check(err error) {
	var me *mysql.MySQLError
	if err != nil && !errors.As(err, &me) {
		l.doneOnce.Do(func() { close(l.done) })
	}
}

func exec[T any](ctx context.Context, l *getLock, f func(ctx context.Context, c *sql.Conn) (T, error)) (T, error) {
	v, err := lock.Call(ctx, func(ctx context.Context) (T, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		return f(ctx, l.c)
	})
	l.check(err)
	return v, err
}

func (l *getLock) Acquire(ctx context.Context, name string) (lock.Held, error) {
	key := l.env.Prefix + name
	for {
		token, err := exec(ctx, l, func(ctx context.Context, c *sql.Conn) (sql.NullInt64, error) {
			var token sql.NullInt64
			err := c.QueryRowContext(ctx, "SELECT IF(GET_LOCK(?, ?) = 1, NEXTVAL(fence), 0)", LockName(key), waitSeconds).Scan(&token)
			return token, err
		})
		switch {
		case err != nil:
			return nil, err
		case !token.Valid:
			return nil, errors.New("GET_LOCK answered NULL: an error on the server")
		case token.Int64 > 0:
			return &held{l: l, key: key, token: token.Int64}, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %w (waited on the server)", lock.ErrNotAcquired, context.Cause(ctx))
		}
	}
}

// ID is the session's connection ID.
func (l *getLock) ID() int64 { return l.id }

// Done is closed once the session is known gone.
func (l *getLock) Done() <-chan struct{} { return l.done }

// Orphan stops the keepalive and ends nothing: the server ends the silent
// session after wait_timeout, and its locks with it.
func (l *getLock) Orphan() { l.stopOnce.Do(func() { close(l.stop) }) }

// Close ends the session, and its locks with it.
func (l *getLock) Close() error {
	l.Orphan()
	l.c.Close()
	return l.db.Close()
}

type held struct {
	l     *getLock
	key   string
	token int64
}

func (h *held) Token() int64 { return h.token }
func (h *held) Key() string  { return h.key }
func (h *held) ID() int64    { return h.l.id }

// Release is RELEASE_LOCK; an answer other than 1 says the session held
// no such lock, and the outcome is left unknown.
func (h *held) Release(ctx context.Context) error {
	r, err := exec(ctx, h.l, func(ctx context.Context, c *sql.Conn) (sql.NullInt64, error) {
		var r sql.NullInt64
		err := c.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", LockName(h.key)).Scan(&r)
		return r, err
	})
	if err == nil && r.Int64 != 1 {
		return fmt.Errorf("RELEASE_LOCK answered %v: the session held no such lock", r)
	}
	return err
}
