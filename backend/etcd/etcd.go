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
	"github.com/locktest/locktest/lock/execlock"
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
		Bugs: []scenario.Bug{bug11456(etcdlock.LockRPCName, "etcd server (v3lock, its Lock RPC)", "etcd 3.4.23 (Debian's etcd-server, its Lock RPC)", "")},
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
		Faults: pauseQueueHead,
	},
	{
		Name:    "etcd-22082",
		Summary: "a Mutex.Unlock whose reply was lost is retried after the same session locked again: it deletes the new grant",
		Topic:   scenario.LockBugs,
		Bugs: []scenario.Bug{{Ref: "etcd#22082", URL: "https://github.com/etcd-io/etcd/issues/22082", Seen: seen,
			Status: "open; a fix is proposed in etcd pull request 22115", Recipes: []string{etcdlock.MutexRetryName}, Shows: []string{"promise 4"},
			Ecosystem: "etcd Go client (concurrency.Mutex)", Affected: "client/v3 concurrency 3.6.16 (unfixed upstream)"}},
		Lesson: "A release whose reply is lost leaves its client in doubt, and services retry on an error. etcd's Mutex " +
			"names its key after its session's lease, so once the same session has locked again, the retried Unlock, a " +
			"delete by key name, deletes the new grant's key: its holder goes on believing it holds the lock while the " +
			"next client is granted it. The contract check names the release that deleted another grant's key (promise " +
			"4). The fix proposed upstream deletes only while the Mutex still owns the grant it was for: --recipe " +
			"mutex-retry-owned does so and keeps the contract when the reply is lost; when the request is lost too (the delete never " +
			"reached etcd), the next Lock is granted the same key at the same create revision, which the fenced retry still deletes.",
		// A 5 s lease: the struck client's lease renewals lose their
		// replies with the release's, and a loaded machine's stall of a
		// second or two on top of that made a 2 s lease lapse, its session
		// with it, and no same-session retry was left to show the bug.
		Run: scenario.Settings{Recipe: etcdlock.MutexRetryName, Time: 5 * time.Second, Clients: 2, TTL: 5,
			ThinkMin: 300 * time.Millisecond, Think: 400 * time.Millisecond, Require: []string{histories.CheckContract}},
		Expect: map[string]map[string]string{
			scenario.Unfenced: {histories.CheckContract: scenario.Invalid},
			scenario.Fenced:   {histories.CheckContract: scenario.Invalid},
		},
		ByRecipe: map[string]map[string]string{
			etcdlock.MutexRetryOwnedName: {histories.CheckContract: scenario.Valid},
		},
		Faults: func(s scenario.Shape) []nemesis.Entry {
			// The holder's release reaches etcd, which deletes its key;
			// the reply is lost. The client retries after its next Lock.
			return []nemesis.Entry{{At: time.Second, Fault: nemesis.LostReplyRelease, Target: nemesis.TargetHolder,
				Fallback: "c0", Duration: 250 * time.Millisecond}}
		},
	},
	{
		Name:    "election-phantom",
		Summary: "etcd's Election.Campaign makes a candidate leader after its key was deleted while it waited in line",
		Topic:   scenario.LockBugs,
		Bugs:    []scenario.Bug{bug11051, bug19597},
		Lesson: "Campaign waits for the candidates before it to be deleted, then returns leadership without reading its " +
			"own key again: a candidate whose lease expired while it waited in line (paused, or cut off) is told it " +
			"leads though its key is gone, and the next candidate is elected too: two leaders, no lease race to blame. " +
			"The contract check names it (promise 2). The fix proposed upstream ends the wait once the candidate's own " +
			"key is deleted; --recipe election-checked reads its key after Campaign and refuses leadership when it is " +
			"gone.",
		Run: scenario.Settings{Recipe: etcdlock.ElectionName, Time: 8 * time.Second, ThinkMin: 200 * time.Millisecond,
			Think: 300 * time.Millisecond, Require: []string{histories.CheckContract}},
		Expect: map[string]map[string]string{
			scenario.Unfenced: {histories.CheckContract: scenario.Invalid},
			scenario.Fenced:   {histories.CheckContract: scenario.Invalid},
		},
		ByRecipe: map[string]map[string]string{
			etcdlock.ElectionCheckedName: {histories.CheckContract: scenario.Valid},
		},
		Faults: scenario.StarveWaiter,
	},
	{
		Name:    "etcd-mutex-3.4",
		Summary: "etcd 3.4.13's own concurrency.Mutex grants a waiter whose lease expired while it queued (the real client, pinned by its adapter's module)",
		Topic:   scenario.LockBugs,
		Bugs:    []scenario.Bug{mutex34Bug()},
		Lesson: "The real Mutex of etcd 3.4's client, not a re-creation: a waiter whose process stops past its lease while " +
			"it queues loses its key, and when the holder lets go Mutex.Lock returns success without checking its " +
			"session (etcd#11456): two clients are told they hold the lock, the contract check's promise 2. The same " +
			"adapter on etcd 3.6.16's client (etcdmutex, the fix of 3.5) refuses the grant. The first run builds the " +
			"3.4 client (about 20 s; .ci/run does it beforehand).",
		// etcd-11456's schedule: long sections and acquires, the head of
		// the queue paused past its lease and woken before the holder
		// lets go (a pause as long as waiter-expiry's outlasts the
		// acquire's own timeout, which then refuses).
		Run: scenario.Settings{Recipe: etcdMutex34, Backend: Name, Time: 6 * time.Second, ThinkMin: 4 * time.Second, Think: 5 * time.Second,
			Clients: 2, OpTimeout: 20 * time.Second, Require: []string{histories.CheckContract}},
		Expect: map[string]map[string]string{
			scenario.Unfenced: {histories.CheckContract: scenario.Invalid},
			scenario.Fenced:   {histories.CheckContract: scenario.Invalid},
		},
		ByRecipe: map[string]map[string]string{
			etcdMutex36: {histories.CheckContract: scenario.Valid},
		},
		Faults: pauseQueueHead,
	},
	{
		Name:    "etcd-22123",
		Summary: "an Election.Resign whose delete never reached etcd forgets leadership; the retry resigns nothing; the session's next Campaign leads again on the old key",
		Topic:   scenario.LockBugs,
		Bugs: []scenario.Bug{{Ref: "etcd#22123", URL: "https://github.com/etcd-io/etcd/issues/22123", Seen: seen,
			Status: "open; fixes are proposed in etcd pull requests 22124, 22211 and 22437", Recipes: []string{etcdlock.ElectionRetryName}, Shows: []string{"promise 1"},
			Ecosystem: "etcd Go client (concurrency.Election)", Affected: "client/v3 concurrency 3.6.16 (unfixed upstream)",
			Reproduced: "2026-11-26, seeds 1-10: 10 of 10 (10.9 s mean, 11.6 s max); the contrast 10 of 10 (11.5 s max)",
			Random: "5 of 5 (held-out seeds 271-275, locktest power: --nemesis all --time 30s, the default flags, 2026-11-27): " +
				"contract invalid in each, its first violation at a median of 6.8 s. Earlier, with the scenario's " +
				"settings (2026-11-26), 0 of 10 (seeds 1-10, no script): contract valid in 10 of 10"}},
		Lesson: "Election.Resign clears its leader key and session whatever its delete answered: when the holder's links " +
			"are cut as it resigns, the delete never reaches etcd and fails, and the Election has already forgotten it " +
			"leads. A service that retries the Resign gets nil (nothing to resign), reports the release done, and the " +
			"key stays under its session's lease; its next Campaign finds its own key still there and leads again on " +
			"the old revision: a grant whose fencing token did not grow, the contract check's promise 1, and nobody " +
			"else could lead meanwhile. The fix proposed upstream keeps the leadership until the delete is answered; " +
			"--recipe election-retry-kept does so and keeps the contract here (under other faults its Campaign, 3.6.16's, " +
			"still shows etcd#11051, as election's does).",
		// A 5 s lease: the cut holder's keepalives are held with its
		// Resign, and its session must outlive the cut.
		Run: scenario.Settings{Recipe: etcdlock.ElectionRetryName, Time: 4 * time.Second, Clients: 2, TTL: 5,
			ThinkMin: 300 * time.Millisecond, Think: 400 * time.Millisecond, Require: []string{histories.CheckContract}},
		Expect: map[string]map[string]string{
			scenario.Unfenced: {histories.CheckContract: scenario.Invalid},
			scenario.Fenced:   {histories.CheckContract: scenario.Invalid},
		},
		ByRecipe: map[string]map[string]string{
			etcdlock.ElectionRetryKeptName: {histories.CheckContract: scenario.Valid},
		},
		Faults: func(scenario.Shape) []nemesis.Entry {
			// The next holder's links are cut on its grant, for longer
			// than its section: its Resign is sent into the cut and fails
			// when the cut ends (the held connection closes).
			return []nemesis.Entry{scenario.Holder(nemesis.Entry{At: time.Second, Fault: nemesis.Isolate, Duration: 1500 * time.Millisecond})}
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
	etcd3Node176,
}

// The etcdmutex adapter on etcd 3.4.13's client (its own module) and on
// the client locktest is built with.
var (
	etcdMutex34 = execlock.Spec("go", "run", "-C", execlock.Adapters+"/etcdmutex34", ".")
	etcdMutex36 = execlock.Spec("go", "run", "-C", execlock.Adapters+"/etcdmutex", ".")
)

// mutex34Bug is etcd#11456 in etcd 3.4.13's own Mutex, as etcd-mutex-3.4
// shows it.
func mutex34Bug() scenario.Bug {
	b := bug11456(etcdMutex34, "etcd Go client (concurrency.Mutex)",
		"etcd 3.4.13's concurrency.Mutex (go.etcd.io/etcd v3.4.13, pinned by "+execlock.Adapters+"/etcdmutex34/go.mod)",
		"2026-11-26, seeds 1-10: 10 of 10 (20.7 s mean, 22.2 s max); the contrast 10 of 10 (24.4 s max)")
	b.Random = "5 of 5 (held-out seeds 281-285, locktest power: --nemesis all --time 30s, the default flags, 2026-11-27): " +
		"contract invalid in each, its first violation at a median of 6.4 s. Earlier, with the scenario's settings " +
		"(2026-11-26), 3 of 10 (seeds 1-10, no script): seeds 3, 5 and 8, promise 2 (a waiter granted after its lease expired)"
	return b
}

// pauseQueueHead stops the head of the queue (its keepalives too) while
// the holder is early in its section, and wakes it after its lease has
// expired but before the holder lets go.
func pauseQueueHead(s scenario.Shape) []nemesis.Entry {
	return []nemesis.Entry{{At: time.Second, Fault: nemesis.PauseClient, Target: nemesis.TargetWaiter, Fallback: "c1",
		Duration: s.TTL + time.Second, Params: map[string]string{"before_write": "false"}}}
}

// seen is where locktest reproduced the bugs of etcd's client: the
// concurrency package of the etcd it is built with.
const seen = "etcd 3.6.16 (client/v3 concurrency)"

// The upstream bugs etcd's scenarios reproduce.
var (
	bug11051 = scenario.Bug{Ref: "etcd#11051", URL: "https://github.com/etcd-io/etcd/issues/11051", Seen: seen,
		Status: "closed as stale, not fixed; a fix is proposed in etcd pull request 22387", Recipes: []string{etcdlock.ElectionName}, Shows: []string{"promise 2"},
		Ecosystem: "etcd Go client (concurrency.Election)", Affected: "client/v3 concurrency 3.6.16 (unfixed upstream)"}
	bug19597 = scenario.Bug{Ref: "etcd#19597", URL: "https://github.com/etcd-io/etcd/issues/19597", Seen: seen,
		Status: "open; a fix is proposed in etcd pull request 22387", Recipes: []string{etcdlock.ElectionName}, Shows: []string{"promise 2"},
		Ecosystem: "etcd Go client (concurrency.Election)", Affected: "client/v3 concurrency 3.6.16 (unfixed upstream)"}
)

// bug11456 is etcd#11456 as recipe shows it in ecosystem, seen in where,
// last reproduced as reproduced says ("" not recorded).
func bug11456(recipe, ecosystem, where, reproduced string) scenario.Bug {
	return scenario.Bug{Ref: "etcd#11456", URL: "https://github.com/etcd-io/etcd/issues/11456", Seen: where, Fixed: true,
		Status: "fixed in 3.5 (the client's concurrency package); not in the 3.4 branch", Recipes: []string{recipe}, Shows: []string{"promise 2"},
		Ecosystem: ecosystem, Affected: "etcd 3.4 and earlier", Reproduced: reproduced}
}

// extensions are what etcd's recipes add to the scenarios of every lock.
var extensions = []scenario.Extension{{
	Scenario: "waiter-expiry",
	Bugs: []scenario.Bug{
		bug11456(etcdlock.Mutex34Name, "etcd Go client (concurrency.Mutex)", "concurrency.Mutex.Lock of etcd 3.4 (re-created as mutex-3.4)", ""),
		bug11051,
	},
	Lesson: "etcd's Mutex.Lock checks (since the fix for etcd#11456); --recipe mutex-3.4 shows the old bug and etcd 3.6's " +
		"own election still has it.",
	ByRecipe: map[string]map[string]string{
		etcdlock.Mutex34Name:  {histories.CheckContract: scenario.Invalid},
		etcdlock.ElectionName: {histories.CheckContract: scenario.Invalid},
	},
}}
