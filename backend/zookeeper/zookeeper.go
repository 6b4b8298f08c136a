// Package zookeeper is ZooKeeper as a locktest backend (Backend, registered
// in backend/registry): its servers (zkserver: an ensemble of real
// QuorumPeerMain processes of Debian's zookeeper package on loopback,
// every client link behind toxiproxy, every peer link behind relays that
// faults cut), its recipes and the API a team's own ZooKeeper recipe is
// written against (zklock), the reader of the servers' transaction logs
// (txnlog), and here the rest of what the seam asks of a backend: its
// flags and Options and words and scenarios (this file), the system it
// offers the faults (system.go), each client's connection (conn.go), and
// the observer of the servers' truth: who deleted each lock znode, at which
// zxid, and why (observer.go).
package zookeeper

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/backend/zookeeper/zklock"
	"github.com/locktest/locktest/backend/zookeeper/zkserver"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/scenario"
	"github.com/locktest/locktest/system"
)

// Name names ZooKeeper in histories and results.
const Name = "zookeeper"

// Backend is ZooKeeper, for backend/registry.
var Backend = backend.Backend{
	Name:      Name,
	Recipes:   zklock.Builtins,
	Terms:     terms,
	Scenarios: scenarios,
	Flags:     flags,
	Defaults:  func() backend.Options { return &Options{} },
	Missing: func(settings map[string]string) error {
		_, err := zkserver.Find(classpath(settings["zk-classpath"]))
		return err
	},
}

// terms are ZooKeeper's words: an ephemeral znode that goes with its
// session, ordered by zxids (the contract judges every promise).
var terms = checker.Terms{
	Expired:       ": its session expired on the servers",
	ExpiredShort:  ": its session expired",
	Noticed:       "%s learned at %s that its session was lost",
	Alive:         "while %s's session was alive",
	Claim:         "the session",
	Unkeyed:       "the lock does not say which znode a grant holds (lock.Keyed)",
	Key:           "znode",
	Revision:      "zxid",
	Unsafe:        "a ZooKeeper session is a lease: a holder paused or cut off past its timeout loses its znode without knowing, so a lock alone is not mutual exclusion",
	Race:          "the session race (the holder's session expired under it: expected for any ZooKeeper lock; fencing is the cure)",
	RaceShort:     "session",
	LegendExpired: "znode deleted with its session (expired or closed)",
	LegendLost:    "client learned its session was lost",
}

// Options say which ZooKeeper a run's servers run, and their tick
// (backend.Options).
type Options struct {
	// Classpath are the jars of QuorumPeerMain and a logger; nil is
	// Debian's zookeeper package (zkserver.DebianClasspath).
	Classpath []string `json:"classpath,omitempty"`
	// Tick is the servers' tickTime (0: zkserver.DefaultTick).
	Tick time.Duration `json:"tick_ns,omitempty"`
}

var _ backend.Options = (*Options)(nil)

// Backend names ZooKeeper.
func (o *Options) Backend() string { return Name }

// Plan checks that java and ZooKeeper's jars are there, before anything
// starts, and sizes the ensemble: 3 servers, or 5.
func (o *Options) Plan(p backend.Plan) ([]string, error) {
	if _, err := zkserver.Find(o.Classpath); err != nil {
		return nil, err
	}
	n := p.Members
	if n == 0 {
		n = 3
	}
	if n != 3 && n != 5 {
		return nil, fmt.Errorf("--members must be 3 or 5 for a ZooKeeper ensemble, got %d", n)
	}
	names := make([]string, n)
	for i := range names {
		names[i] = zkserver.ServerName(i)
	}
	return names, nil
}

// Prototype: an ensemble.
func (o *Options) Prototype(backend.Plan) system.System { return (*ensemble)(nil) }

// Args are --members and the flags set.
func (o *Options) Args(members int) []string {
	args := []string{"--members", strconv.Itoa(members)}
	if len(o.Classpath) > 0 {
		args = append(args, "--zk-classpath", strings.Join(o.Classpath, ":"))
	}
	if o.Tick != 0 && o.Tick != zkserver.DefaultTick {
		args = append(args, "--zk-tick", o.Tick.String())
	}
	return args
}

// Start starts the ensemble, its data under the run directory, its logs
// in the run's.
func (o *Options) Start(ctx context.Context, p backend.Plan) (*backend.Started, error) {
	in, err := zkserver.Find(o.Classpath)
	if err != nil {
		return nil, err
	}
	e, err := zkserver.Start(ctx, zkserver.Config{Servers: p.Members, Dir: p.Dir, LogDir: p.LogDir, TickTime: o.Tick, Install: in})
	if err != nil {
		return nil, fmt.Errorf("starting the ensemble: %w", err)
	}
	return &backend.Started{System: newEnsemble(e, p.LogDir), Workload: Workload(e), Version: e.Version(), Close: e.Close}, nil
}

// classpath reads --zk-classpath.
func classpath(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ":")
}

// flags adds ZooKeeper's command-line flags to fs.
func flags(fs *flag.FlagSet) func() (backend.Options, error) {
	cp := fs.String("zk-classpath", "", "with a ZooKeeper recipe: the jars its servers run QuorumPeerMain from, colon-separated; the observer reads their transaction logs as 3.8's are (default: Debian's zookeeper package, "+strings.Join(zkserver.DebianClasspath, ":")+")")
	tick := fs.Duration("zk-tick", zkserver.DefaultTick, "with a ZooKeeper recipe: the servers' tickTime (sessions last 2 ticks to a minute; a follower may lag 5 ticks)")
	return func() (backend.Options, error) {
		if *tick < time.Millisecond || *tick%time.Millisecond != 0 {
			return nil, fmt.Errorf("--zk-tick must be a positive whole number of milliseconds, got %v", *tick)
		}
		return &Options{Classpath: classpath(*cp), Tick: *tick}, nil
	}
}

// scenarios are ZooKeeper's own catalog scenarios.
var scenarios = []scenario.Scenario{
	{
		Name:    "zk-session-expiry",
		Summary: "ZooKeeper's lease race: the holder stops (a GC pause) past its session timeout; its znode goes with the session; the next waiter is granted and writes; the first wakes and writes",
		Topic:   scenario.Fencing,
		Lesson: "A ZooKeeper lock is a lease: the session. A holder that stops sends no pings, the leader expires its session " +
			"after the timeout and deletes its ephemeral znode, and the next waiter in line is granted the lock and writes. The " +
			"first holder learns of the expiry only when it reconnects after waking, and has already written by then. The " +
			"znode's creation zxid is a fencing token that grows with every grant: the fenced resource rejects the late write.",
		Run:    scenario.Settings{Time: 8 * time.Second, Recipe: zklock.LockName, Clients: 3},
		Expect: scenario.Damage,
		Faults: scenario.PauseHolderBeforeWrite,
	},
	ghostNode,
	kazoo732,
	writeLockLostWatch,
	curator696,
	curator604,
	{
		Name:    "zk-leader-loss",
		Summary: "the ZooKeeper leader is partitioned away, and later crashed, while a client holds the lock: what ZooKeeper gets right",
		Topic:   scenario.Keeps,
		Lesson: "ZAB keeps the lock safe when the leader goes: the old leader stops serving once it lost its quorum, the others " +
			"elect a new one in about a second, and the new leader gives every session a fresh timeout, so no holder loses its " +
			"znode to the election; clients move their sessions to the servers they reach. Mutual exclusion holds, only waits grow.",
		Run: scenario.Settings{Time: 10 * time.Second, Recipe: zklock.LockName,
			Require: []string{histories.CheckResource, histories.CheckContract, histories.CheckLiveness}},
		Expect: map[string]map[string]string{
			scenario.Unfenced: {histories.CheckResource: scenario.Valid, histories.CheckContract: scenario.Valid, histories.CheckLiveness: scenario.Valid},
			scenario.Fenced:   {histories.CheckResource: scenario.Valid, histories.CheckContract: scenario.Valid, histories.CheckLiveness: scenario.Valid},
		},
		Faults: func(scenario.Shape) []nemesis.Entry {
			return []nemesis.Entry{
				{At: time.Second, Fault: nemesis.PartitionLeader, Target: nemesis.TargetLeader, Fallback: "zk1", Duration: 3 * time.Second,
					Params: map[string]string{"links": "refuse"}},
				{At: 6 * time.Second, Fault: nemesis.CrashLeader, Target: nemesis.TargetLeader, Fallback: "zk2", Duration: 2 * time.Second},
			}
		},
	},
}
