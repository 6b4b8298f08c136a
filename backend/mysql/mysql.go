// Package mysql is MySQL's GET_LOCK, on MariaDB, as a locktest backend
// (Backend, registered in backend/registry): its server (mysqlserver: a
// real mariadbd, installed in the run directory, every client link behind
// toxiproxy), its recipe and the API a team's own recipe is written
// against (mysqllock), and here the rest of the seam: its flags and
// Options, the system it offers the faults (system.go), each client's
// connection (conn.go), the observer of who holds each lock and of the
// sessions the server ended (observer.go), and its words and scenario.
package mysql

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/backend/mysql/mysqllock"
	"github.com/locktest/locktest/backend/mysql/mysqlserver"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/scenario"
	"github.com/locktest/locktest/system"
)

// Name names MySQL (MariaDB) in histories and results.
const Name = "mysql"

// Backend is MySQL's GET_LOCK on MariaDB, for backend/registry.
var Backend = backend.Backend{
	Name:      Name,
	Recipes:   mysqllock.Builtins,
	Terms:     terms,
	Scenarios: scenarios,
	Flags:     flags,
	Defaults:  func() backend.Options { return &Options{} },
	Missing: func(settings map[string]string) error {
		_, err := mysqlserver.Find(settings["mysql-bin"])
		return err
	},
}

var terms = checker.Terms{
	Expired:       ": the server ended its silent session (wait_timeout): its lock went with it",
	ExpiredShort:  ": the server ended its session",
	Noticed:       "%s noticed at %s that its session was gone",
	Alive:         "while %s's session was alive",
	Claim:         "the session",
	Key:           "GET_LOCK lock",
	Unordered:     Name + " records no revisions, so the history cannot order a grant's decision against the server's ending of a session",
	Unkeyed:       "the lock does not say which key a grant holds (lock.Keyed)",
	Unsafe:        "a GET_LOCK lock lasts as long as the server believes its session lives, and a holder cut off from the server keeps believing: a lock alone is not mutual exclusion",
	Race:          "the session race (the server ended the holder's silent session while it still worked: expected for any session-held lock; fencing is the cure)",
	RaceShort:     "session",
	LegendExpired: "server ended the session",
	LegendLost:    "client found its session gone",
}

// DefaultIdleTimeout is the server's wait_timeout unless
// --mysql-wait-timeout says otherwise: the default TTL's.
const DefaultIdleTimeout = 2 * time.Second

// Options say which mariadbd a run's server runs, and its wait_timeout.
type Options struct {
	Bin         string        `json:"mysql_bin,omitempty"`
	IdleTimeout time.Duration `json:"mysql_wait_timeout,omitempty"`
}

var _ backend.Options = (*Options)(nil)

func (o *Options) Backend() string { return Name }

func (o *Options) Plan(backend.Plan) ([]string, error) {
	if _, err := mysqlserver.Find(o.Bin); err != nil {
		return nil, err
	}
	return []string{mysqlserver.Name}, nil
}

func (o *Options) Prototype(backend.Plan) system.System { return (*mySystem)(nil) }

func (o *Options) Args(int) []string {
	var args []string
	if o.Bin != "" {
		args = append(args, "--mysql-bin", o.Bin)
	}
	if o.IdleTimeout != 0 && o.IdleTimeout != DefaultIdleTimeout {
		args = append(args, "--mysql-wait-timeout", o.IdleTimeout.String())
	}
	return args
}

// Start installs the server's data directory and starts it.
func (o *Options) Start(ctx context.Context, p backend.Plan) (*backend.Started, error) {
	b, err := mysqlserver.Find(o.Bin)
	if err != nil {
		return nil, err
	}
	idle := o.IdleTimeout
	if idle == 0 {
		idle = DefaultIdleTimeout
	}
	s, err := mysqlserver.Start(ctx, mysqlserver.Config{Binary: b, Dir: p.Dir, LogDir: p.LogDir, IdleTimeout: idle, Setup: mysqllock.Schema})
	if err != nil {
		return nil, fmt.Errorf("starting mariadbd: %w", err)
	}
	return &backend.Started{System: newSystem(s, p.LogDir), Workload: Workload(s), Version: b.Version, Close: s.Close}, nil
}

func flags(fs *flag.FlagSet) func() (backend.Options, error) {
	bin := fs.String("mysql-bin", "", "with a MySQL recipe: the mariadbd its server runs (default: /usr/sbin/mariadbd, else on PATH)")
	idle := fs.Duration("mysql-wait-timeout", DefaultIdleTimeout, "with a MySQL recipe: the server's wait_timeout (whole seconds), after which it ends a silent session and its locks (the lockers speak every third of it)")
	return func() (backend.Options, error) {
		if *idle < time.Second || *idle%time.Second != 0 {
			return nil, fmt.Errorf("--mysql-wait-timeout must be a whole number of seconds, at least 1s, got %v", *idle)
		}
		return &Options{Bin: *bin, IdleTimeout: *idle}, nil
	}
}

var scenarios = []scenario.Scenario{
	{
		Name:    "mysql-session-ended",
		Summary: "mysql-get-lock: the holder's link is cut mid-section; the server ends its silent session after wait_timeout, and GET_LOCK's lock with it; the next client is granted it while the first still works",
		Topic:   scenario.Fencing,
		Lesson: "A GET_LOCK lock lasts as long as its session. A holder cut off from the server cannot keep it: the server " +
			"ends the session after wait_timeout and frees the lock (Combodo/iTop#209: GET_LOCK silently released), and " +
			"the next waiter is granted it while the first, told nothing, writes. NEXTVAL of a sequence taken in the " +
			"lock's own statement grows with every grant: the fenced resource rejects the late write.",
		Run: scenario.Settings{Time: 6 * time.Second, Recipe: mysqllock.GetLockName, Think: 2500 * time.Millisecond, ThinkMin: 2500 * time.Millisecond,
			Clients: 3, Require: []string{histories.CheckResource}},
		Expect: scenario.Damage,
		Faults: func(s scenario.Shape) []nemesis.Entry {
			return []nemesis.Entry{scenario.Holder(nemesis.Entry{At: 2 * time.Second, Fault: nemesis.Isolate, Duration: 2*s.TTL + 2*time.Second})}
		},
	},
	{
		Name:    "mysql-idle-holder",
		Summary: "mysql-get-lock-idle: no fault at all; a holder's critical section outlasts wait_timeout, the server ends its silent session and frees the lock while it works",
		Topic:   scenario.Fencing,
		Lesson: "GET_LOCK is silently released when the server ends a session idle past wait_timeout (Combodo/iTop pull " +
			"request 209): a holder that keeps its session silent through a long critical section loses the lock with no " +
			"fault anywhere, and never learns it; the next client is granted it. The contract's promise 5 (a live holder " +
			"keeps its claim) breaks. mysql-get-lock speaks on its session every third of wait_timeout and keeps it.",
		Run: scenario.Settings{Time: 8 * time.Second, Recipe: mysqllock.IdleName, Think: 3 * time.Second, ThinkMin: 3 * time.Second,
			Clients: 2, Require: []string{histories.CheckContract}},
		Expect: map[string]map[string]string{
			scenario.Unfenced: {histories.CheckContract: scenario.Invalid},
			scenario.Fenced:   {histories.CheckContract: scenario.Invalid, histories.CheckResource: scenario.Valid},
		},
		Faults: func(scenario.Shape) []nemesis.Entry { return nil },
	},
}
