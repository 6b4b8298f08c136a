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
		Recipes: []string{curatorLatch}, Ecosystem: "Java: Apache Curator (LeaderLatch)",
		Affected: "LeaderLatch since Curator 5.4.0 (CURATOR-644/645), until 5.7.0"}},
	Lesson: "When Curator's connection has been suspended for the session timeout it declares the session lost and makes a " +
		"new one, but a LeaderLatch keeps its node's path: on reconnecting it lists the latch's children, and while the " +
		"servers still hold the old session (a restarted ensemble gives every session it restores a fresh timeout) its old " +
		"node is there, first in line, and the latch takes the leadership on it. The servers then expire the old session and " +
		"delete the node; the latch watches only the node before its own, so it never learns, and the next candidate is " +
		"elected beside it: the resource check names the double leadership. Curator pull request 500 (5.7.0) takes the " +
		"leadership only on a node of the current session and resets otherwise; with it applied (--fix=500) there is one leader.",
	// A 3 s session: the ensemble is down 3.5 s, past the session
	// timeout (Curator declares the session lost 3 s after it suspended),
	// and restarts with the old sessions alive for 3 s more, the window in
	// which the waiter reconnects. Sections outlast the old session's
	// expiry; the waiter waits through the outage.
	Run: scenario.Settings{Recipe: curatorLatch, Backend: Name, Time: 6 * time.Second, Quiet: 3 * time.Second, Clients: 2, TTL: 3,
		ThinkMin: 4 * time.Second, Think: 5 * time.Second, OpTimeout: 15 * time.Second,
		Require: []string{histories.CheckResource}},
	Expect: map[string]map[string]string{
		scenario.Unfenced: {histories.CheckResource: scenario.Invalid},
		scenario.Fenced:   {histories.CheckResource: scenario.Valid},
	},
	ByRecipe: map[string]map[string]string{
		curatorLatchFixed: {histories.CheckResource: scenario.Valid},
	},
	Faults: func(scenario.Shape) []nemesis.Entry {
		// The whole ensemble is down while the first holder works and the
		// other waits; it restarts from its data and gives every session
		// it restores a fresh timeout.
		return []nemesis.Entry{{At: time.Second, Fault: nemesis.CrashMember, Target: nemesis.AllMembers, Duration: 3500 * time.Millisecond}}
	},
}
