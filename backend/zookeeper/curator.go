package zookeeper

import (
	"time"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/lock/execlock"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/scenario"
)

// curatorClasspath is the Java adapter's classpath: Debian's jars, whose
// manifests name what they need in turn (Curator 5.4.0, ZooKeeper 3.8.0).
const curatorClasspath = "/usr/share/java/curator-recipes.jar:/usr/share/java/zookeeper-recipes-lock.jar:/usr/share/java/slf4j-simple.jar"

// curator is the recipe of the Java adapter's lock mode with flags.
func curator(mode string, flags ...string) string {
	return execlock.Spec(append([]string{"java", "-cp", curatorClasspath, execlock.Adapters + "/ZkLocks.java", mode}, flags...)...)
}

// Curator's LeaderLatch as the scenario of CURATOR-696 runs it, with the
// installed Curator and with the upstream fix applied to it.
var (
	curatorLatch      = curator("leader-latch")
	curatorLatchFixed = curator("leader-latch", "--fix=500")
)

// Curator's InterProcessMutex as the scenario of CURATOR-604 runs it, with
// the installed Curator and with the check of Curator pull request 500
// applied to its grant.
var (
	curatorMutex      = curator("curator-mutex")
	curatorMutexFixed = curator("curator-mutex", "--fix=604")
)

// curator604 is Curator's InterProcessMutex, which after a reconnect on a
// new session grants the lock on its contender node of the old session,
// which the servers still hold and delete later.
var curator604 = scenario.Scenario{
	Name:    "curator-604",
	Summary: "the ZooKeeper ensemble is down past the session timeout; Curator gives up the session and makes a new one; a waiting InterProcessMutex is granted on its old session's node, which the servers delete: two holders",
	Topic:   scenario.LockBugs,
	Bugs: []scenario.Bug{{Ref: "CURATOR-604", URL: "https://github.com/apache/curator/issues/1121",
		Seen:    "Curator 5.4.0 (Debian's libcurator-recipes-java)",
		Status:  "open; no fix proposed (a maintainer would rather guard the holder's writes with the lock's path, CURATOR-689)",
		Recipes: []string{curatorMutex}, Shows: []string{"promise 8"}, Ecosystem: "Java: Apache Curator (InterProcessMutex)",
		Affected:   "InterProcessMutex of Curator 5.4.0, and of every release since (5.9.0's LockInternals grants without a session check)",
		Reproduced: "2026-11-26, seeds 1-10: 10 of 10 (21.3 s mean, 28.1 s max, at a load average of 8-24); the contrast 10 of 10 (23.6 s mean, 32.2 s max)",
		Random:     "0 of 10 (seeds 1-10, `locktest run` with the scenario's recipe, 5 clients, no script; by the adapter's log): Curator injected 17 session expirations in 5 runs, none followed by a grant on an old session's node; since the outage opening (an aimed schedule's whole-ensemble crash, issue 36), `locktest power` seeds 1-5: 4 of 5 by the contract's promise 8, each the bug's; with the giving-up opening right after the outage (2026-11-27, tuning seeds): 4 of 5 on seeds 1-5, 5 of 5 on seeds 6-10 as before it (the outage's restart 0.7-0.9 s), 2 of 5 under a heavier load (restarts 1.6-16.9 s; missed at 1.9-16.9 s); held out, seeds 326-330 (locktest power, 2026-11-27): 5 of 5, a median 5.9 s to the first violation; seeds 725-729 (2026-11-28, load 3-8): 3 of 5, one miss struck as the holder's release was on its way, one found no moment; with the outage struck at a holder still in its section (2026-11-28, at realtime priority beside other work, restarts under 1 s): held out, seeds 730-734: 5 of 5, a median 8.3 s"}},
	Lesson: "When Curator's connection has been suspended for the session timeout it declares the session lost and makes a " +
		"new one, but an InterProcessMutex waiting in acquire keeps its contender node's path: once reconnected it lists " +
		"the lock's children, and while the servers still hold the old session (a restarted ensemble gives every session " +
		"it restores a fresh timeout) its old node is there, and first in line once the holder has let go: acquire returns " +
		"the lock on it. The servers then expire the old session and delete the node; nothing tells the holder, and the next " +
		"waiter is granted beside it: the mutex check names the two holders, and the contract check's promise 8 the grant on a node of " +
		"another session than the one the adapter says it answered on. Upstream has no fix (a maintainer calls it the " +
		"mutex version of CURATOR-696); the contrast (--fix=604, in the adapter) applies to the mutex's grant the check " +
		"Curator pull request 500 gave LeaderLatch: a node not of the current session is let go and the acquire goes on, " +
		"and there is one holder.",
	Run:      outageSettings(curatorMutex),
	Expect:   twoHolders,
	ByRecipe: map[string]map[string]string{curatorMutexFixed: oneHolder},
	Faults:   ensembleDown,
}

// ensembleDown is the outage of the Curator scenarios: the whole ensemble
// is down while the first holder works and the other client waits, past
// the session timeout; it restarts from its data and gives every session
// it restores a fresh timeout.
func ensembleDown(scenario.Shape) []nemesis.Entry {
	return []nemesis.Entry{{At: time.Second, Fault: nemesis.CrashMember, Target: nemesis.AllMembers, Duration: 3500 * time.Millisecond}}
}

// curator696 is Curator's LeaderLatch, which after a reconnect on a new
// session takes the leadership on its node of the old session, which the
// servers still hold and delete later.
var curator696 = scenario.Scenario{
	Name:    "curator-696",
	Summary: "the ZooKeeper ensemble is down past the session timeout; Curator gives up the session and makes a new one; a waiting LeaderLatch takes the leadership on its old session's node, which the servers delete: two leaders",
	Topic:   scenario.LockBugs,
	Bugs: []scenario.Bug{{Ref: "CURATOR-696", URL: "https://github.com/apache/curator/issues/1211",
		Seen: "Curator 5.4.0 (Debian's libcurator-recipes-java)", Fixed: true,
		Status:  "fixed in Curator 5.7.0 by pull request 500",
		Recipes: []string{curatorLatch}, Shows: []string{"promise 8"}, Ecosystem: "Java: Apache Curator (LeaderLatch)",
		Affected:   "LeaderLatch from Curator 5.4.0 (its reconnect handling since CURATOR-644/645) until 5.7.0",
		Reproduced: "2026-11-26, seeds 1-10: 10 of 10 (19.0 s mean, 26.4 s max, at a load average of 8-24); the contrast 10 of 10 (22.4 s mean, 29.8 s max)",
		Random:     "0 of 10 (seeds 1-10, `locktest run` with the scenario's recipe, 5 clients, no script; by the adapter's log of a grant on an old session's node): Curator injected 14 session expirations in 5 runs, but the servers had expired each old session first (random faults restart one member at a time); since the outage opening (an aimed schedule's whole-ensemble crash, issue 36), `locktest power` seeds 1-5: 5 of 5 by the contract's promise 8, each the bug's; with the giving-up opening right after the outage (2026-11-27, tuning seeds): 5 of 5 on seeds 1-5, 4 of 5 on seeds 6-10 (missed behind a restart of 3.0 s); held out, seeds 326-330 (locktest power, 2026-11-27): 5 of 5, a median 9.6 s to the first violation; seeds 725-729 (2026-11-28, load 3-8): 2 of 5, two misses struck as the holder's release was on its way or done, one behind a restart of 2.6 s; with the outage struck at a holder still in its section (2026-11-28, at realtime priority beside other work, restarts under 1 s): held out, seeds 730-734: 5 of 5, a median 8.1 s"}},
	Lesson: "When Curator's connection has been suspended for the session timeout it declares the session lost and makes a " +
		"new one, but a LeaderLatch keeps its node's path: on reconnecting it lists the latch's children, and while the " +
		"servers still hold the old session (a restarted ensemble gives every session it restores a fresh timeout) its old " +
		"node is there, first in line, and the latch takes the leadership on it. The servers then expire the old session and " +
		"delete the node; the latch watches only the node before its own, so it never learns, and the next candidate is " +
		"elected beside it: the mutex check names the two leaders, and the contract check's promise 8 the grant on a node of another " +
		"session than the one the adapter says it answered on. Curator pull request 500 (5.7.0) takes the " +
		"leadership only on a node of the current session and resets otherwise; the contrast applies it to 5.4.0's latch in " +
		"the adapter (--fix=500: the same check when await returns, then the latch's own reset), and there is one leader.",
	Run:      outageSettings(curatorLatch),
	Expect:   twoHolders,
	ByRecipe: map[string]map[string]string{curatorLatchFixed: oneHolder},
	Faults:   ensembleDown,
}

// outageSettings are both scenarios' settings, for recipe. A 3 s session:
// the ensemble is down 3.5 s, past the session timeout (Curator declares
// the session lost 3 s after it suspended), and restarts with the old
// sessions alive for 3 s more, the window in which the waiter reconnects.
// Sections outlast the old session's expiry; the waiter waits through the
// outage.
func outageSettings(recipe string) scenario.Settings {
	return scenario.Settings{Recipe: recipe, Backend: Name, Time: 6 * time.Second, Quiet: 3 * time.Second, Clients: 2, TTL: 3,
		ThinkMin: 4 * time.Second, Think: 5 * time.Second, OpTimeout: 20 * time.Second,
		Require: []string{histories.CheckMutex}}
}

// twoHolders is what both scenarios expect of the library as it is: the
// mutex check names two holders, the contract check the grant on another
// session's node (promise 8, by the session the adapter tells); only a
// fenced resource refuses the old grant's write.
var twoHolders = map[string]map[string]string{
	scenario.Unfenced: {histories.CheckMutex: scenario.Invalid, histories.CheckContract: scenario.Invalid, histories.CheckResource: scenario.Invalid},
	scenario.Fenced:   {histories.CheckMutex: scenario.Invalid, histories.CheckContract: scenario.Invalid, histories.CheckResource: scenario.Valid},
}

// oneHolder is what they expect of a contrast: the fix applied.
var oneHolder = map[string]string{histories.CheckMutex: scenario.Valid, histories.CheckContract: scenario.Valid, histories.CheckResource: scenario.Valid}
