package zookeeper

import (
	"time"

	"github.com/locktest/locktest/backend/zookeeper/zklock"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/scenario"
)

// ghostNode is the lock recipe's classic pitfall under a lost reply: a
// create of an ephemeral sequential node the servers applied, whose reply
// never came back.
var ghostNode = scenario.Scenario{
	Name:    "zk-ghost-node",
	Summary: "a lock's create of its sequential znode is applied but its reply is lost; the client creates another; the first, owned by its live session, stalls the queue",
	Topic:   scenario.LockBugs,
	Bugs:    []scenario.Bug{bug1262},
	Lesson: "A create whose reply is lost leaves the client in doubt: ZooKeeper may have created its znode. A lock that simply " +
		"creates again (--recipe zk-unprotected) leaves the first znode behind, owned by its own live session, so it is " +
		"never deleted: once it reaches the head of the queue nobody holds the lock and nobody gets it, its creator " +
		"included, until that session ends. Safe, but stalled: the liveness check names it. ZooKeeper's recipes page " +
		"(\"Recoverable Errors and the GUID\") and Curator's protected mode put a unique id in the znode's name and, after a " +
		"connection loss, list the children to find it again; zk-lock does so and keeps its liveness.",
	// Acquires wait as long as the run (Curator's acquire() without a
	// timeout waits for good): a client that gave up would end its
	// session, the ghost with it (the workload starts a new process,
	// with a new session, after an unknown outcome).
	Run: scenario.Settings{Recipe: zklock.UnprotectedName, Time: 4 * time.Second, Clients: 3,
		ThinkMin: 200 * time.Millisecond, Think: 300 * time.Millisecond, OpTimeout: 12 * time.Second,
		Require: []string{histories.CheckLiveness}},
	Expect: map[string]map[string]string{
		scenario.Unfenced: {histories.CheckLiveness: scenario.Invalid},
		scenario.Fenced:   {histories.CheckLiveness: scenario.Invalid},
	},
	ByRecipe: map[string]map[string]string{
		zklock.LockName: {histories.CheckLiveness: scenario.Valid},
	},
	Faults: func(scenario.Shape) []nemesis.Entry {
		// The holder lets go and queues again: its create reaches the
		// servers, which apply it; the reply is dropped, then the
		// connection cut, and the client reconnects on the same session.
		return []nemesis.Entry{scenario.Holder(nemesis.Entry{At: time.Second, Fault: nemesis.LostReplyAcquire,
			Duration: 250 * time.Millisecond})}
	},
}

// bug1262 is the lock recipe's documented pitfall: ZOOKEEPER-1262 reported
// that the recipes page's lock did not handle a create applied on the server
// whose result never reached the client; the page has since said how
// (a GUID in the name, looked for after a recoverable error).
var bug1262 = scenario.Bug{Ref: "ZOOKEEPER-1262", URL: "https://issues.apache.org/jira/browse/ZOOKEEPER-1262",
	Seen: "ZooKeeper 3.8.0 (Debian's zookeeper) with go-zookeeper, a lock that creates again after a connection loss", Fixed: true,
	Status: "a pitfall of the lock recipe, not of the server; fixed in the documentation: the recipes page's \"Recoverable " +
		"Errors and the GUID\" says how, and Curator's protected mode (CreateBuilder.withProtection) does it",
	Recipes: []string{zklock.UnprotectedName}, Shows: []string{"ghost"}, Ecosystem: "ZooKeeper's lock recipe",
	Affected: "a lock that creates its znode again after a connection loss, as the recipe was first documented",
	Random: "10 of 10 (seeds 1-10, locktest power: --nemesis all --time 30s, the default flags, 2026-11-27): each a ghost the " +
		"liveness check read from the servers' logs (the struck client gave up behind its own node, which went only with its " +
		"session); 0 of 5 before that check and the lost acquire replies' aim"}
