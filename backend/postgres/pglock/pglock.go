// Package pglock is the PostgreSQL backend of package lock: the connection
// a PostgreSQL recipe gets (the address of the client's own link to the
// server), and the built-in recipes, one file each.
//
// Built-in recipes (Builtins):
//
//   - pg-advisory: a session-level advisory lock (pg_advisory_lock) on one
//     connection the holder keeps for it, in the statement that also takes
//     nextval of a sequence: the token, taken while the lock is held, grows
//     with every grant. The lock lasts as long as the server believes the
//     session lives; the locker keeps it alive with a query every
//     IdleTimeout/3 (the server ends a silent session after
//     idle_session_timeout), and a holder cut off or paused past it loses
//     its lock without learning it: nothing on the connection tells it.
//   - pg-advisory-xact: the transaction-scoped form (pg_advisory_xact_lock)
//     inside a transaction the holder keeps open, COMMIT its release; the
//     same keepalive (idle_in_transaction_session_timeout ends a silent
//     one). Its token is taken once the lock is held, on a second session
//     in a statement that commits: the open transaction's WAL is not
//     flushed until it commits, so a nextval in it did not survive a crash
//     of the server, and the token was handed out again.
//   - pg-lease: a lease row (name, holder, expiry, fence) taken by an
//     INSERT ... ON CONFLICT DO UPDATE that succeeds only when the row's
//     expiry is past on the server's clock (now()), bumping its fence, the
//     token, in the same statement; a watchdog renews it every TTL/3 and the
//     holder learns it lost the lease when a renewal finds the row not its
//     own, or a TTL passed since the last one that succeeded began.
//
// And broken on purpose, a real mistake the checks must catch:
//
//   - pg-lease-client-clock: pg-lease with the expiry written and compared
//     on the client's clock instead of the server's: a client whose clock
//     runs ahead takes a lease its holder still has.
package pglock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktest/locktest/lock"
)

// Conn is lock.Env.Conn for a PostgreSQL recipe: how one client reaches
// the server.
type Conn struct {
	// Addr is the client's own link to the server ("host:port").
	Addr string
	// Client names the client: its sessions' application_name, which the
	// server's log and pg_stat_activity show.
	Client string
	// IdleTimeout is how long the server lets a session be silent.
	IdleTimeout time.Duration
}

// Connect opens a session over the client's link. Commands are bounded by
// their contexts; pgx then breaks the connection, as a client library
// whose statement timed out does.
func (c *Conn) Connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(connString(c.Addr))
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["application_name"] = c.Client
	// The simple protocol: one round trip a statement, and no prepared
	// statements a dropped connection could leave behind.
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	return pgx.ConnectConfig(ctx, cfg)
}

// pool is a pool of at most n sessions over the client's link, which
// connects lazily, on its first statement. Idle sessions are closed before
// the server would end them, and checked before reuse, as a pool of a
// server with idle_session_timeout is set up.
func (c *Conn) pool(n int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(connString(c.Addr))
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = c.Client
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	cfg.MaxConns = n
	cfg.MaxConnIdleTime = c.IdleTimeout / 2
	cfg.HealthCheckPeriod = c.IdleTimeout / 4
	return pgxpool.NewWithConfig(context.Background(), cfg)
}

func connString(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	return fmt.Sprintf("host=%s port=%s user=postgres dbname=postgres sslmode=disable connect_timeout=2", host, port)
}

// Env is what a PostgreSQL recipe gets for one client.
type Env struct {
	lock.Env
	*Conn
}

// RecipeFunc makes a lock.Recipe of a name and a function of a PostgreSQL
// Env; it refuses a connection that is not a *Conn.
func RecipeFunc(name string, newLocker func(ctx context.Context, env Env) (lock.Locker, error)) lock.Recipe {
	return lock.RecipeFunc(name, func(ctx context.Context, env lock.Env) (lock.Locker, error) {
		c, ok := env.Conn.(*Conn)
		if !ok {
			return nil, fmt.Errorf("recipe %s needs a *pglock.Conn, got %T", name, env.Conn)
		}
		return newLocker(ctx, Env{Env: env, Conn: c})
	})
}

// Sessioned is implemented by a Held whose lock is held by a server
// session: PID is its backend's process ID, by which the observer finds
// the lock in pg_locks and the session's end in the server's log.
type Sessioned interface {
	lock.Keyed
	PID() uint32
}

// Leased is implemented by a Held whose lock is a lease row: the observer
// tells its grant by the row's fence, the token.
type Leased interface {
	lock.Keyed
	Leased()
}

// Built-in recipe names.
const (
	AdvisoryName    = "pg-advisory"
	XactName        = "pg-advisory-xact"
	LeaseName       = "pg-lease"
	ClientClockName = "pg-lease-client-clock"
)

// Builtins are the built-in PostgreSQL recipes, the correct ones first.
var Builtins = []lock.Builtin{
	{Name: AdvisoryName, Doc: "`pg_advisory_lock` on one session the locker keeps for it (asked again every 500 ms, `lock_timeout`), released with `pg_advisory_unlock`; the token is `nextval` of a sequence taken in the lock's own statement.", New: func() lock.Recipe { return Advisory(false) }},
	{Name: XactName, Doc: "`pg_advisory_xact_lock` in a transaction the holder keeps open, released by `COMMIT`; the token is `nextval` of the same sequence, taken once the lock is held in a statement of its own that commits (a `nextval` inside the open transaction is lost with it when the server crashes, and handed out again).", New: func() lock.Recipe { return Advisory(true) }},
	{Name: LeaseName, Doc: "a lease row (`name, holder, expires, fence`) taken with `INSERT ... ON CONFLICT DO UPDATE ... WHERE expires < clock_timestamp()` (the server's clock), renewed every TTL/3; the token is the row's `fence`, bumped by the granting statement.", New: func() lock.Recipe { return Lease(false) }},
	{Name: ClientClockName, Doc: "broken on purpose: `pg-lease` with the expiry written and compared on the client's clock: a client whose clock runs ahead takes a live lease.", New: func() lock.Recipe { return Lease(true) }, Broken: true},
}

// Schema is what the recipes need on the server: the advisory locks'
// fencing sequence and the lease table.
const Schema = `CREATE SEQUENCE IF NOT EXISTS locktest_fence;
CREATE TABLE IF NOT EXISTS locktest_lease (name text PRIMARY KEY, holder text NOT NULL, expires timestamptz NOT NULL, fence bigint NOT NULL)`

// LeaseTable is the lease rows' table, for the observer.
const LeaseTable = "locktest_lease"

// AdvisoryKey is the advisory lock key of a lock key: a 64-bit FNV-1a
// hash. pg_locks shows it as classid (its high 32 bits) and objid (its low
// 32 bits), objsubid 1.
func AdvisoryKey(key string) int64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return int64(h.Sum64())
}

// lockTimeout bounds each wait on the server for an advisory lock: the
// waiter then holds nothing and asks again, so that its context rarely
// ends with a statement in flight (whose outcome would be unknown).
const lockTimeout = 500 * time.Millisecond

// notAcquired reports whether err is the server's lock_timeout: the
// statement was cancelled while it waited, and granted nothing.
func notAcquired(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "55P03"
}

// newValue is a grant's own holder value: the client's name and random
// bytes.
func newValue(client string) string {
	var b [8]byte
	rand.Read(b[:])
	return client + ":" + hex.EncodeToString(b[:])
}

func ttlOf(env Env) time.Duration { return time.Duration(env.TTL) * time.Second }
