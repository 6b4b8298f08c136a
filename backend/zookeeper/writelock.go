package zookeeper

import (
	"time"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/scenario"
)

// ZooKeeper's own lock recipe (WriteLock, Debian's zookeeper-recipes-lock
// 3.8.0) as the scenario of its lost watch runs it, and with the fix applied
// to it: when the node it would watch is gone, it looks again.
var (
	zkWriteLock      = curator("writelock")
	zkWriteLockFixed = curator("writelock", "--fix=26")
)

// writeLockLostWatch is WriteLock, which lists the lock's children and then
// watches the node before its own with exists: when that node is deleted
// in between, exists sets a watch for its creation, which never comes, and
// the lock is never granted.
var writeLockLostWatch = scenario.Scenario{
	Name:    "zk-writelock-watch",
	Summary: "ZooKeeper's WriteLock recipe lists the queue, then watches the node before its own; the holder lets go in between (the waiter's requests are slow): the watch is for a node that will never come back, and nobody gets the lock",
	Topic:   scenario.LockBugs,
	Bugs: []scenario.Bug{{Ref: "shayhatsor/zookeeper#26", URL: "https://github.com/shayhatsor/zookeeper/issues/26",
		Seen:    "ZooKeeper 3.8.0's lock recipe (Debian's libzookeeper-java, zookeeper-recipes-lock.jar)",
		Status:  "open; reported on ZooKeeperNetEx (the recipe's .NET port) as a bug of the Java recipe too; no fix in ZooKeeper's recipe as of 3.8.0",
		Recipes: []string{zkWriteLock}, Shows: []string{"unwoken"}, Ecosystem: "Java: ZooKeeper's lock recipe (WriteLock)",
		Affected: "org.apache.zookeeper.recipes.lock.WriteLock, 3.8.0 here (its LockZooKeeperOperation.execute); kazoo had the " +
			"same race until kazoo pull request 490",
		Reproduced: "2026-11-26, seeds 1-10: 10 of 10 (26.1 s mean, 31.2 s max, at a load average of 14-27 on 2 cores); the " +
			"contrast 10 of 10 (WriteLock lost its watch in 7 of them and the fix looked again; 35.0 s mean, 50.7 s max, at a " +
			"load average of 31-65)",
		Random: "0 of 10 (seeds 1-10, the scenario's settings, --nemesis all --time 30s, no script): no run's adapter log has " +
			"the lost watch; liveness invalid in 2 (seeds 5 and 10), none the bug's: waits of 7.2 and 8.7 s behind 3.6 s sections " +
			"after crashes of members and pauses and isolations of holders. Again 0 of 5 (seeds 1-5, locktest power, " +
			"2026-11-27, with the giving-up opening and the orphan), no lost watch in any adapter log; and under the default " +
			"flags no judgement of the lock's idle time could see it: the stall ends when the stuck waiter's acquire gives up " +
			"(4 s) and its unlock wakes the next waiter, under the 7 s bound. With the lost-watch opening and the unwoken " +
			"rule (2026-11-27, locktest power, held-out seeds 331-335): 2 of 5 (24.9 and 27.1 s), both unwoken waiters whose " +
			"adapter logged the lost watch on the very node; the opening comes third, after the outage and the giving-up cut, " +
			"and the race did not happen in the other three. With its three tries and the line ahead moving (held-out seeds " +
			"336-340, locktest power, 2026-11-27): 5 of 5, a median 16.3 s to the first violation, each an unwoken waiter " +
			"and the lost watch in each run's adapter log"}},
	Lesson: "WriteLock's lock() lists the lock's children and, when its node is not first, calls exists with a watch on the " +
		"node just before its own. If that node was deleted between the listing and the exists (here the waiter's requests " +
		"are slowed, so the holder lets go in between), exists returns null and leaves a watch for the node's creation, which " +
		"never comes (sequential names are not reused); lock() logs \"Could not find the stats for less than me\" and returns " +
		"false, and while its connection holds no event calls it again. The waiter waits until its acquire is given up, and " +
		"the next client queues behind its node: the lock is free and nobody is granted it, and the liveness check names " +
		"the stall. The contrast " +
		"(--fix=26) looks again when the node it was to watch is gone, as kazoo's lock does since kazoo pull request 490, " +
		"and the lock keeps being granted.",
	// A 4 s session (the slowed links stay inside its read timeout).
	// Sections of 3.6 s: the slowed holder's release reaches the servers
	// 0.8 s late, the other client is granted then, and the slowed client,
	// asking again at once, lists the queue 4 latencies later and calls
	// exists 5 latencies later (3.2 s and 4 s), with the other's release
	// between them. It then waits until its acquire is given up (the op
	// timeout, 11 s) and its session ends, past the bound after the heal
	// (5 s: above the session timeout, which a claim can outlive the heal
	// by).
	Run: scenario.Settings{Recipe: zkWriteLock, Backend: Name, Time: 9500 * time.Millisecond, Quiet: 5500 * time.Millisecond,
		LivenessBound: 5 * time.Second, Clients: 2, TTL: 4, ThinkMin: 3600 * time.Millisecond, Think: 3600 * time.Millisecond,
		OpTimeout: 11 * time.Second, Require: []string{histories.CheckLiveness}},
	Expect: map[string]map[string]string{
		scenario.Unfenced: {histories.CheckLiveness: scenario.Invalid},
		scenario.Fenced:   {histories.CheckLiveness: scenario.Invalid},
	},
	ByRecipe: map[string]map[string]string{
		zkWriteLockFixed: {histories.CheckLiveness: scenario.Valid},
	},
	Faults: func(scenario.Shape) []nemesis.Entry {
		// The first holder's requests reach the servers 0.8 s late (their
		// replies are not delayed), from its grant until after its next
		// acquire has watched.
		return []nemesis.Entry{scenario.Holder(nemesis.Entry{At: 0, Fault: nemesis.Slow, Duration: 9500 * time.Millisecond,
			Params: map[string]string{"link": Name, "toxic": "latency", "latency": "800ms", "jitter": "0s"}})}
	},
}
