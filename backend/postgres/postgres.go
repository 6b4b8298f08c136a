// Package postgres is PostgreSQL as a locktest backend (Backend, registered
// in backend/registry): its server (pgserver: a real PostgreSQL primary,
// made by initdb in the run directory, every client link behind
// toxiproxy), its recipes and the API a team's own PostgreSQL recipe is
// written against (pglock), and here the rest of what the seam asks of a
// backend: its flags and Options, the system it offers the faults
// (system.go), each client's connection (conn.go), the observer of the
// server's locks, lease rows and ended sessions (observer.go), and its
// words and scenarios (this file).
package postgres

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/backend/postgres/pglock"
	"github.com/locktest/locktest/backend/postgres/pgserver"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/scenario"
	"github.com/locktest/locktest/system"
)

// Name names PostgreSQL in histories and results.
const Name = "postgres"

// Backend is PostgreSQL, for backend/registry.
var Backend = backend.Backend{
	Name:      Name,
	Recipes:   pglock.Builtins,
	Terms:     terms,
	Scenarios: scenarios,
	Flags:     flags,
	Defaults:  func() backend.Options { return &Options{} },
	Missing: func(settings map[string]string) error {
		_, err := pgserver.Find(settings["pg-bin"])
		return err
	},
}

// terms are PostgreSQL's words: a lock held by a session the server ends
// when it falls silent (or a lease row whose expiry passes on the server's
// clock), on a server whose history has no revisions.
var terms = checker.Terms{
	Expired:       ": the server ended its session (idle_session_timeout), or its lease row expired on the server's clock: its lock went with it",
	ExpiredShort:  ": the server ended its session or lease",
	Noticed:       "%s noticed at %s that its lock was gone",
	Alive:         "while %s's session (or lease row) was alive",
	Claim:         "the session",
	Key:           "advisory lock",
	Unordered:     Name + " records no revisions, so the history cannot order a grant's decision against the server's ending of a session",
	Unkeyed:       "the lock does not say which key a grant holds (lock.Keyed)",
	Unsafe:        "a database lock lasts as long as the server believes its session lives, and a holder cut off from the server keeps believing: a lock alone is not mutual exclusion",
	Race:          "the session race (the server ended the holder's silent session while it still worked: expected for any session-held lock; fencing is the cure)",
	RaceShort:     "session",
	LegendExpired: "server ended the session (or the lease row expired)",
	LegendLost:    "client found its session or lease gone",
}

// DefaultIdleTimeout is the server's idle_session_timeout unless
// --pg-idle-timeout says otherwise: the default TTL's.
const DefaultIdleTimeout = 2 * time.Second

// Options say which PostgreSQL a run's server runs, and how soon it ends
// a silent session (backend.Options).
type Options struct {
	// Bin is the directory of initdb and postgres; "" is Debian's newest.
	Bin string `json:"pg_bin,omitempty"`
	// IdleTimeout is idle_session_timeout; 0 is DefaultIdleTimeout.
	IdleTimeout time.Duration `json:"pg_idle_timeout,omitempty"`
}

var _ backend.Options = (*Options)(nil)

func (o *Options) Backend() string { return Name }

// Plan checks that PostgreSQL is there: one member, the primary, and its
// replica when the run fails over.
func (o *Options) Plan(p backend.Plan) ([]string, error) {
	if _, err := pgserver.Find(o.Bin); err != nil {
		return nil, err
	}
	if replicated(p) {
		return []string{pgserver.Name, pgserver.ReplicaName}, nil
	}
	return []string{pgserver.Name}, nil
}

func (o *Options) Prototype(p backend.Plan) system.System {
	if replicated(p) {
		return (*replicatedPG)(nil)
	}
	return (*pgSystem)(nil)
}

func (o *Options) Args(int) []string {
	var args []string
	if o.Bin != "" {
		args = append(args, "--pg-bin", o.Bin)
	}
	if o.IdleTimeout != 0 && o.IdleTimeout != DefaultIdleTimeout {
		args = append(args, "--pg-idle-timeout", o.IdleTimeout.String())
	}
	return args
}

func (o *Options) idleTimeout() time.Duration {
	if o.IdleTimeout == 0 {
		return DefaultIdleTimeout
	}
	return o.IdleTimeout
}

// Start makes the primary's data directory and starts it, and its
// replica when the run fails over.
func (o *Options) Start(ctx context.Context, p backend.Plan) (*backend.Started, error) {
	b, err := pgserver.Find(o.Bin)
	if err != nil {
		return nil, err
	}
	s, err := pgserver.Start(ctx, pgserver.Config{Binary: b, Dir: p.Dir, LogDir: p.LogDir, IdleTimeout: o.idleTimeout(), Setup: pglock.Schema, Replica: replicated(p)})
	if err != nil {
		return nil, fmt.Errorf("starting postgres: %w", err)
	}
	return &backend.Started{System: newSystem(s, p.LogDir), Workload: Workload(s), Version: b.Version, Close: s.Close}, nil
}

// flags adds PostgreSQL's command-line flags to fs.
func flags(fs *flag.FlagSet) func() (backend.Options, error) {
	bin := fs.String("pg-bin", "", "with a PostgreSQL recipe: the directory of the initdb and postgres its server runs, 14 or later (default: Debian's newest, /usr/lib/postgresql/*/bin)")
	idle := fs.Duration("pg-idle-timeout", DefaultIdleTimeout, "with a PostgreSQL recipe: the server's idle_session_timeout, after which it ends a silent session and its locks (the lockers speak every third of it)")
	return func() (backend.Options, error) {
		if *idle < 100*time.Millisecond {
			return nil, fmt.Errorf("--pg-idle-timeout must be at least 100ms, got %v", *idle)
		}
		return &Options{Bin: *bin, IdleTimeout: *idle}, nil
	}
}

// scenarios are PostgreSQL's own catalog scenarios.
var scenarios = []scenario.Scenario{
	{
		Name:    "pg-session-ended",
		Summary: "pg-advisory: the holder's link is cut mid-section; the server ends its silent session, and its advisory lock with it; the next client is granted the lock while the first still works",
		Topic:   scenario.Fencing,
		Lesson: "A session-level advisory lock lasts as long as the server believes the session lives. A holder cut off " +
			"from the database cannot keep its session: the server ends it after idle_session_timeout (keepalives cannot " +
			"tell it sooner through a link that holds the bytes), frees the lock, and the next waiter is granted it, " +
			"while the first holder, told nothing, goes on and writes (JasperFx/wolverine#2602). The token, nextval of a " +
			"sequence taken in the lock's own statement, grows with every grant: the fenced resource rejects the late write.",
		Run: scenario.Settings{Time: 6 * time.Second, Recipe: pglock.AdvisoryName, Think: 2500 * time.Millisecond, ThinkMin: 2500 * time.Millisecond,
			Clients: 3, Require: []string{histories.CheckResource}},
		Expect: scenario.Damage,
		Faults: func(s scenario.Shape) []nemesis.Entry {
			return []nemesis.Entry{scenario.Holder(nemesis.Entry{At: 2 * time.Second, Fault: nemesis.Isolate, Duration: 2*s.TTL + 2*time.Second})}
		},
	},
	{
		Name:    "pg-failover",
		Summary: "pg-advisory on a primary with a streaming replica: the primary is lost mid-section and the replica promoted; the holder's advisory lock did not follow, and the next client is granted it there while the first still works",
		Topic:   scenario.ServerLoss,
		Lesson: "Advisory locks live in the primary's memory and are never written to the WAL: when the primary is lost " +
			"and its replica promoted (pg_promote(), as Patroni or an operator does), every one is gone, and the clients, " +
			"moved to the new primary, are granted the locks their holders still believe they hold. The holder's session " +
			"went with the old primary, but nothing tells it before its next statement: it goes on and writes. " +
			"pg-advisory's token, nextval of a sequence in a statement that commits at once, had reached the replica (a " +
			"sequence logs 32 values ahead): it grows past the failover, and the fenced resource refuses the late write " +
			"(so does pg-advisory-xact's, taken in a statement of its own that commits). Not so with --recipe pg-lease, " +
			"whose lease row granted after the replication's cut is lost with the primary: the promoted replica grants " +
			"the same tokens again, and the fenced resource accepts two holders' writes with one (invariant invalid).",
		Run: scenario.Settings{Time: 10 * time.Second, Recipe: pglock.AdvisoryName, Think: 3 * time.Second, ThinkMin: 3 * time.Second,
			Clients: 3, Require: []string{histories.CheckResource}},
		Expect: scenario.Damage,
		Faults: func(s scenario.Shape) []nemesis.Entry {
			return []nemesis.Entry{{At: time.Second, Fault: nemesis.Failover, Target: nemesis.TargetHolder, Fallback: "c0",
				Duration: 2 * time.Second, Params: map[string]string{"ahead": (s.TTL + s.TTL/4).String() + "-"}}}
		},
	},
	{
		Name:    "pg-lease-clock-ahead",
		Summary: "pg-lease-client-clock: a waiter's clock jumps 3 s ahead (past the 2 s TTL); comparing the lease row's expiry on its own clock, it takes the lease its holder still has",
		Topic:   scenario.Fencing,
		Lesson: "A lease row is only as good as the clock its expiry is compared on. Written and compared on the clients' " +
			"clocks, a waiter whose clock runs ahead finds a live lease expired and takes it while its holder works: two " +
			"holders, with no fault of the holder's and no fault of the database. pg-lease compares on the server's clock " +
			"(clock_timestamp()) and keeps the lock under the same fault. The fence column is bumped with every grant, so " +
			"the fenced resource still refuses the older holder's late writes.",
		Run: scenario.Settings{Time: 6 * time.Second, Recipe: pglock.ClientClockName, Think: 1500 * time.Millisecond, ThinkMin: 1500 * time.Millisecond,
			Clients: 3, Require: []string{histories.CheckMutex}},
		Expect: map[string]map[string]string{
			scenario.Unfenced: {histories.CheckMutex: scenario.Invalid},
			scenario.Fenced:   {histories.CheckMutex: scenario.Invalid, histories.CheckResource: scenario.Valid},
		},
		Faults: func(scenario.Shape) []nemesis.Entry {
			return []nemesis.Entry{{At: time.Second, Fault: nemesis.ClockBump, Target: nemesis.TargetWaiter, Fallback: "c1", Duration: 4 * time.Second,
				// Past the TTL, short of the operation timeout (5 s): a jump
				// past it would end the waiter's acquire in flight, with an
				// unknown outcome the mutex check may excuse.
				Params: map[string]string{"delta": "3s"}}}
		},
	},
}
