// Package redis is Redis as a locktest backend (Backend, registered in
// backend/registry): its servers (redisserver: real redis-server processes
// on loopback, one master, a master with a replica and Sentinel, or
// independent masters, every client link behind toxiproxy), its recipes and
// the API a team's own Redis recipe is written against (redislock), and
// here the rest of what the seam asks of a backend: its flag and Options,
// the deployment a run starts and the system it offers the faults
// (system.go), each client's connection (conn.go), the observer of the
// servers' keyspace events and whose grant each deletion ended
// (observer.go), and its words and scenarios (this file).
package redis

import (
	"context"
	"flag"
	"time"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/backend/redis/redislock"
	"github.com/locktest/locktest/backend/redis/redisserver"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/scenario"
	"github.com/locktest/locktest/system"
)

// Name names Redis in histories and results.
const Name = "redis"

// Backend is Redis, for backend/registry.
var Backend = backend.Backend{
	Name:      Name,
	Recipes:   redislock.Builtins,
	Terms:     terms,
	Scenarios: scenarios,
	Flags:     flags,
	Defaults:  func() backend.Options { return &Options{} },
	Missing: func(settings map[string]string) error {
		_, err := redisserver.Find(settings["redis-bin"])
		return err
	},
}

// terms are Redis's words: a lock key with a TTL, kept by a watchdog, on
// servers that order nothing by revisions.
var terms = checker.Terms{
	Expired:       ": its key expired on the server (TTL)",
	ExpiredShort:  ": its key expired (TTL)",
	Noticed:       "%s's watchdog noticed at %s that its key was gone",
	Alive:         "before %s's key had expired (TTL)",
	Claim:         "the key",
	KeyTTL:        true,
	Unordered:     Name + " has no revisions, so the history cannot order a grant's decision against the server's deletions",
	Unkeyed:       "the lock does not say which key a grant holds (redislock.Valued)",
	Unsafe:        "the lock's key expires on the server (TTL) whether or not its holder is done: a lock alone is not mutual exclusion",
	Race:          "the expiry race (the key's TTL ran out under its holder: expected for any lock whose key expires; fencing is the cure)",
	RaceShort:     "expiry",
	LegendExpired: "key expired on the server",
	LegendLost:    "client's watchdog found its lock lost",
}

// Options say which redis-server a run's servers run (backend.Options).
type Options struct {
	// RedisBin is the redis-server binary; "" is the one on PATH.
	RedisBin string `json:"redis_bin,omitempty"`
}

var _ backend.Options = (*Options)(nil)

// Backend names Redis.
func (o *Options) Backend() string { return Name }

// Plan checks that redis-server is there, before anything starts, and
// sizes the deployment: its servers are the members.
func (o *Options) Plan(p backend.Plan) ([]string, error) {
	if _, err := redisserver.Find(o.RedisBin); err != nil {
		return nil, err
	}
	return topology(p).Names(), nil
}

// Prototype: with a replica and Sentinel, a system that fails over.
func (o *Options) Prototype(p backend.Plan) system.System {
	if topology(p) == redisserver.Replicated {
		return (*replicatedRedis)(nil)
	}
	return (*redisSystem)(nil)
}

// Args: the deployment's size is its topology's, not the user's.
func (o *Options) Args(int) []string {
	if o.RedisBin == "" {
		return nil
	}
	return []string{"--redis-bin", o.RedisBin}
}

// Start starts the deployment of p's topology.
func (o *Options) Start(ctx context.Context, p backend.Plan) (*backend.Started, error) {
	t := topology(p)
	r, err := startRedis(ctx, o.RedisBin, t, p.Dir, p.LogDir)
	if err != nil {
		return nil, err
	}
	var sys system.System = r
	if t == redisserver.Replicated {
		sys = &replicatedRedis{redisSystem: r}
	}
	return &backend.Started{System: sys, Workload: Workload(r.d), Version: r.d.Binary().Version, Close: r.Close}, nil
}

// flags adds Redis's command-line flag to fs.
func flags(fs *flag.FlagSet) func() (backend.Options, error) {
	bin := fs.String("redis-bin", "", "with a Redis recipe: the redis-server its servers run, 7.0 or later (default: redis-server on PATH)")
	return func() (backend.Options, error) { return &Options{RedisBin: *bin}, nil }
}

// bareMajority pauses two of Redlock's five masters (r3, r4) until a
// client is granted the lock on the other three, as a network would that
// cut them off from that client: the holder then has a bare majority,
// r0-r2.
func bareMajority() nemesis.Entry {
	return nemesis.Entry{At: time.Second, Fault: nemesis.PauseMember, Target: "r3", Duration: 8 * time.Second,
		Params: map[string]string{"with": "r4", "until": "grant"}}
}

// scenarios are Redis's own catalog scenarios.
var scenarios = []scenario.Scenario{
	{
		Name:    "oversold-redis",
		Summary: "the flash sale on real Redis: SET NX EX, a holder paused past its TTL, and its late DEL removes the next holder's key",
		Topic:   scenario.Release,
		Lesson: "redis-del is the incident's lock: SET NX with a TTL and release by a plain DEL. A holder paused past its TTL " +
			"loses the key to the next client, then wakes, sells, and DELs the key the next holder set, handing the lock to " +
			"a third client mid-sale: items are oversold. Its token is an INCR taken after the grant, not a fencing token: " +
			"the order of the tokens is not the order of the grants, so a fenced resource cannot trust it.",
		Run: scenario.Settings{Time: 8 * time.Second, Recipe: redislock.DelName, Workload: histories.WorkloadStock, Items: 40,
			Think: 200 * time.Millisecond, ThinkMin: 100 * time.Millisecond, Require: []string{histories.CheckInvariant, histories.CheckContract}},
		Expect: map[string]map[string]string{
			scenario.Unfenced: {histories.CheckInvariant: scenario.Invalid, histories.CheckContract: scenario.Invalid},
			scenario.Fenced:   {histories.CheckContract: scenario.Invalid},
		},
		Faults: scenario.PauseHolderBeforeWrite,
	},
	{
		Name:    "failover-redis",
		Summary: "Redis with a replica and Sentinel: the replication is cut, a client takes the lock on the master only, the master dies, Sentinel promotes the replica",
		Topic:   scenario.ServerLoss,
		Lesson: "Redis replicates asynchronously: a lock the master granted and lost before its replica saw it does not exist " +
			"on the replica Sentinel promotes, and the next client is granted it there while the first still works. Its " +
			"fencing counter goes back with it: the promoted replica hands out tokens it never saw given. Replication " +
			"does not make a single-Redis lock safe; WAIT would only narrow the window.",
		Run: scenario.Settings{Time: 14 * time.Second, Recipe: redislock.SetNXName, Think: 3 * time.Second, ThinkMin: 3 * time.Second, Clients: 3,
			Require: []string{histories.CheckMutex}},
		Expect: map[string]map[string]string{
			scenario.Unfenced: {histories.CheckMutex: scenario.Invalid},
			scenario.Fenced:   {histories.CheckMutex: scenario.Invalid},
		},
		Faults: func(s scenario.Shape) []nemesis.Entry {
			return []nemesis.Entry{{At: time.Second, Fault: nemesis.Failover, Target: nemesis.TargetHolder, Fallback: "c0",
				Duration: 2 * time.Second, Params: map[string]string{"ahead": (s.TTL + s.TTL/4).String() + "-"}}}
		},
	},
	{
		Name:    "redlock-restart",
		Summary: "Redlock (Kleppmann): a holder holds 3 of 5 masters; one of them crashes and restarts without persistence; another client gets 3 of 5",
		Topic:   scenario.ServerLoss,
		Lesson: "Redlock's safety rests on every master keeping its keys: a client granted the lock on a bare majority (two " +
			"masters were unreachable) loses it when one of its three restarts empty, and the next client is granted the " +
			"lock on that one and the two others while the first still works. Two holders; and Redlock has no fencing " +
			"token to save the resource (Kleppmann, \"How to do distributed locking\", 2016).",
		Run: scenario.Settings{Time: 12 * time.Second, Recipe: redislock.RedlockName, Think: 3 * time.Second, ThinkMin: 3 * time.Second, Clients: 3,
			Require: []string{histories.CheckMutex}},
		Expect: map[string]map[string]string{
			scenario.Unfenced: {histories.CheckMutex: scenario.Invalid},
			scenario.Fenced:   {histories.CheckMutex: scenario.Invalid},
		},
		Faults: func(scenario.Shape) []nemesis.Entry {
			return []nemesis.Entry{
				bareMajority(),
				// The holder is kept in its section until the next
				// client is granted the lock: on a loaded host that grant
				// came after the section's end.
				{At: time.Second, Fault: nemesis.CrashMember, Target: "r2", Duration: 300 * time.Millisecond,
					Params: map[string]string{"until": "grant"}},
			}
		},
	},
	{
		Name:    "redlock-clock",
		Summary: "Redlock (Kleppmann): a holder holds 3 of 5 masters; the clock of one jumps forward (emulated) and its key expires; another client gets 3 of 5",
		Topic:   scenario.ServerLoss,
		Lesson: "Redlock assumes the masters' clocks run at about the same rate: one that jumps forward expires the holder's " +
			"key early, and with two masters unreachable when it was granted, the holder is left with no majority while it " +
			"still works; the next client is granted the lock. The jump is EMULATED here (the master's keys expired early, " +
			"no clock changed): the servers share the host clock.",
		Run: scenario.Settings{Time: 12 * time.Second, Recipe: redislock.RedlockName, Think: 3 * time.Second, ThinkMin: 3 * time.Second, Clients: 3,
			Require: []string{histories.CheckMutex}},
		Expect: map[string]map[string]string{
			scenario.Unfenced: {histories.CheckMutex: scenario.Invalid},
			scenario.Fenced:   {histories.CheckMutex: scenario.Invalid},
		},
		Faults: func(s scenario.Shape) []nemesis.Entry {
			return []nemesis.Entry{
				bareMajority(),
				{At: time.Second, Fault: nemesis.ClockJumpEmulated, Target: "r2", Duration: s.TTL},
			}
		},
	},
	redisPy3847,
	redisPy4279,
	nodeRedlock296,
}
