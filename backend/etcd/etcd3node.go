package etcd

import (
	"time"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/lock/execlock"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/scenario"
)

// The Node etcd3 adapter's Election, on the package's 1.1.0 release
// (pinned as etcd3-1.1.0 by the adapters' package.json) and on 1.1.2,
// whose campaign waits until no older key is left.
var (
	etcd3Election110 = execlock.Spec("node", execlock.Adapters+"/etcd3_node.js", "--election", "--etcd3=1.1.0")
	etcd3Election    = execlock.Spec("node", execlock.Adapters+"/etcd3_node.js", "--election")
)

// etcd3Node176 is the etcd3 package's Election, whose campaign in 1.1.0
// waits for the one key just before its own and then leads.
var etcd3Node176 = scenario.Scenario{
	Name:    "etcd3-node-176",
	Summary: "the Node etcd3 package's Election (1.1.0): the candidate next in line stops past its lease, and the one behind it leads while the leader still leads",
	Topic:   scenario.LockBugs,
	Bugs: []scenario.Bug{{Ref: "microsoft/etcd3#176", URL: "https://github.com/microsoft/etcd3/issues/176", Fixed: true,
		Seen:    "etcd3 1.1.0 (npm, pinned as etcd3-1.1.0 by " + execlock.Adapters + "/package.json)",
		Status:  "closed; fixed in etcd3 1.1.1 (its published code waits again after each deletion until no older key is left)",
		Recipes: []string{etcd3Election110}, Shows: []string{"promise 3"}, Ecosystem: "Node: etcd3 (Election)", Affected: "etcd3 1.1.0 (npm), the release that brought elections",
		Reproduced: "2026-11-26, seeds 1-10: 10 of 10 (25.3 s mean, 28.7 s max); the contrast 10 of 10 (27.1 s mean, 33.4 s max: 3 runs over 30 s at a load average of 40-46 on 2 cores, beside another run)",
		Random: "5 of 5 (held-out seeds 281-285, locktest power: --nemesis all --time 30s, the default flags, 2026-11-27): " +
			"contract invalid in each, its first violation at a median of 9.6 s. Earlier, with the scenario's settings " +
			"(2026-11-26), 1 of 10 (seeds 1-10, no script): " +
			"contract unknown in 8, promise 3 left unjudged as the grants carry no decision revision"}},
	Lesson: "A campaign of the Node etcd3 package 1.1.0 looks up the one key created just before its own, waits for it " +
		"to be deleted, and then leads, without looking again: when the candidate queued behind the leader dies (here " +
		"its process stops past its lease, and etcd deletes its key), the candidate behind it is elected while the " +
		"leader still holds its key and leads. Two leaders at once: the contract check's promise 3 (an overlap that no " +
		"loss explains). etcd3 1.1.1 waits again after each deletion until no older key is left; the same adapter on " +
		"1.1.2 keeps the contract.",
	// Three candidates, terms of 3.5 s (the second term's follower is
	// paused on its start: see pauseSecondInLine).
	Run: scenario.Settings{Recipe: etcd3Election110, Backend: Name, Time: 8 * time.Second, Quiet: 3 * time.Second,
		ThinkMin: 3500 * time.Millisecond, Think: 3500 * time.Millisecond, Clients: 3, OpTimeout: 12 * time.Second, Require: []string{histories.CheckContract}},
	Expect: map[string]map[string]string{
		scenario.Unfenced: {histories.CheckContract: scenario.Invalid},
		scenario.Fenced:   {histories.CheckContract: scenario.Invalid},
	},
	ByRecipe: map[string]map[string]string{
		etcd3Election: {histories.CheckContract: scenario.Valid},
	},
	Faults: pauseSecondInLine,
}

// pauseSecondInLine pauses, past its lease, the candidate next in line
// as the second term begins: the client waiting longest then is the one
// that queued at the start behind both first leaders (the first leader
// queued again only when it resigned; who queued first at the start, no
// order of asking tells). The first term begins within the first second
// or two; the fault waits from 3 s for the next section to begin.
func pauseSecondInLine(s scenario.Shape) []nemesis.Entry {
	return []nemesis.Entry{{At: 3 * time.Second, Fault: nemesis.PauseClient, Target: nemesis.TargetWaiter, Fallback: "c2",
		Duration: s.TTL + time.Second, Params: map[string]string{"before_write": "false", "ahead": "3s-"}}}
}
