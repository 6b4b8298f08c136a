// Package etcd is etcd as a locktest backend (Backend, registered in
// backend/registry): its servers (cluster: members embedded in locktest's
// process, as OS processes of any etcd 3.4 or later, or a running cluster,
// every client link behind toxiproxy), its recipes and the API a team's own
// etcd recipe is written against (etcdlock), and here the rest of what the
// seam asks of a backend: its flags and Options (options.go), each client's
// connection with its lease kept alive on the client's clock (conn.go,
// lease.go) and the revisions its lock read (revisions.go), the observer of
// the server's truth (observer.go) and who deleted each lock key
// (deletions.go), the etcd-txn resource kept in etcd (txn.go), and its
// words and scenarios (this file).
package etcd

import (
	"time"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/backend/etcd/etcdlock"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/scenario"
)

// Name names etcd in histories and results.
const Name = "etcd"

// Backend is etcd, for backend/registry.
var Backend = backend.Backend{
	Name:       Name,
	Recipes:    etcdlock.Builtins,
	Terms:      terms,
	Resources:  []backend.Resource{{Mode: TxnMode, Help: "values in etcd, written by Txns guarded by the lock"}},
	Scenarios:  scenarios,
	Extensions: extensions,
	Modules:    map[string]string{"go.etcd.io/etcd/server/v3": "etcd"},
	Flags:      flags,
	Defaults:   func() backend.Options { return &Options{} },
	Missing:    missing,
}

// terms are etcd's words: a lock key under a lease, ordered by revisions
// (the contract judges every promise).
var terms = func() checker.Terms {
	t := checker.LeaseTerms
	t.Unkeyed = "the lock does not say which etcd key a grant holds (etcdlock.Keyed)"
	t.Unsafe = "etcd documents this for leases: a lock alone is not mutual exclusion"
	return t
}()

// scenarios are etcd's own catalog scenarios.
var scenarios = []scenario.Scenario{
	{
		Name:    "oversold",
		Summary: "a flash sale: a holder stalls inside its critical section longer than its lease, and a release deletes whoever holds the lock",
		Topic:   scenario.Release,
		Lesson: "A holder that stalls past its lease (a slow dependency, a pause) overlaps the next holder, and a release " +
			"that deletes the lock key whoever holds it (no ownership check) then hands the lock to a third client in the " +
			"middle of the second's sale: several clients sell at once and more items are sold than there were. Fencing " +
			"the writes keeps the count right.",
		Run: scenario.Settings{Time: 8 * time.Second, Recipe: etcdlock.UnlockAnyName, Workload: histories.WorkloadStock, Items: 40,
			Think: 200 * time.Millisecond, ThinkMin: 100 * time.Millisecond, Require: []string{histories.CheckResource, histories.CheckInvariant}},
		Expect: map[string]map[string]string{
			scenario.Unfenced: {histories.CheckInvariant: scenario.Invalid},
			scenario.Fenced:   {histories.CheckResource: scenario.Valid, histories.CheckInvariant: scenario.Valid},
		},
		Faults: scenario.PauseHolderBeforeWrite,
	},
	{
		Name:    "etcd-11456",
		Summary: "etcd 3.4.23's own Lock RPC grants a waiter whose lease expired while it queued (Debian's etcd-server)",
		Topic:   scenario.LockBugs,
		Lesson: "A waiter paused in the server's queue for longer than its lease loses its key, yet etcd 3.4's Lock RPC " +
			"still answers it with success once the holder lets go (etcd#11456, fixed in 3.5): two clients are told they " +
			"hold the lock. This runs the etcd binary of a real release as member processes; --etcd-bin '' runs the " +
			"built-in etcd, which refuses the grant (session is expired).",
		// etcd's own raft timings (100 ms heartbeats, a 1 s election
		// timeout), not locktest's quick ones: on a loaded machine, 3.4's
		// processes with a 100 ms timeout changed leaders every second or
		// two, and each new leader extends every lease, so the paused
		// waiter's lease outlived its pause and there was no bug to see.
		Run: scenario.Settings{System: map[string]string{"cluster": "process", "etcd-bin": "/usr/bin/etcd", "raft-tick": "100", "raft-election": "1000"},
			Recipe: etcdlock.LockRPCName, Time: 8 * time.Second, ThinkMin: 4 * time.Second, Think: 5 * time.Second, Clients: 3, OpTimeout: 20 * time.Second,
			Require: []string{histories.CheckContract}},
		Expect: map[string]map[string]string{
			scenario.Unfenced: {histories.CheckContract: scenario.Invalid},
			scenario.Fenced:   {histories.CheckContract: scenario.Invalid},
		},
		Faults: func(s scenario.Shape) []nemesis.Entry {
			// The head of the queue stops (its keepalives too) while the
			// holder is early in its section, and wakes after its lease
			// has expired but before the holder lets go.
			return []nemesis.Entry{{At: time.Second, Fault: nemesis.PauseClient, Target: nemesis.TargetWaiter, Fallback: "c1",
				Duration: s.TTL + time.Second, Params: map[string]string{"before_write": "false"}}}
		},
	},
	{
		Name:    "leader-loss",
		Summary: "the leader is partitioned away, and later crashed, while a client holds the lock: what etcd gets right",
		Topic:   scenario.Keeps,
		Lesson: "Raft keeps the lock safe when the leader goes: the old leader cannot commit without a majority, a new one is " +
			"elected in a few hundred milliseconds, and leases survive the change (a new leader extends them). Mutual " +
			"exclusion holds, only waits grow.",
		Run: scenario.Settings{Time: 10 * time.Second, Require: []string{histories.CheckResource, histories.CheckContract, histories.CheckLiveness}},
		Expect: map[string]map[string]string{
			scenario.Unfenced: {histories.CheckResource: scenario.Valid, histories.CheckContract: scenario.Valid, histories.CheckLiveness: scenario.Valid},
			scenario.Fenced:   {histories.CheckResource: scenario.Valid, histories.CheckContract: scenario.Valid, histories.CheckLiveness: scenario.Valid},
		},
		Faults: func(scenario.Shape) []nemesis.Entry {
			return []nemesis.Entry{
				{At: time.Second, Fault: nemesis.PartitionLeader, Target: nemesis.TargetLeader, Fallback: "m0", Duration: 3 * time.Second,
					Params: map[string]string{"links": "refuse"}},
				{At: 6 * time.Second, Fault: nemesis.CrashLeader, Target: nemesis.TargetLeader, Fallback: "m1", Duration: 2 * time.Second},
			}
		},
	},
}

// extensions are what etcd's recipes add to the scenarios of every lock.
var extensions = []scenario.Extension{{
	Scenario: "waiter-expiry",
	Refs:     []string{"etcd#11456"},
	Lesson: "etcd's Mutex.Lock checks (since the fix for etcd#11456); --recipe mutex-3.4 shows the old bug and etcd 3.6's " +
		"own election still has it.",
	ByRecipe: map[string]map[string]string{
		etcdlock.Mutex34Name:  {histories.CheckContract: scenario.Invalid},
		etcdlock.ElectionName: {histories.CheckContract: scenario.Invalid},
	},
}}
