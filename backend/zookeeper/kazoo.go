package zookeeper

import (
	"time"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/lock/execlock"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/scenario"
)

// The kazoo adapter as the scenario of kazoo#732 runs it: a new Lock for
// every acquire (as kazoo#732's workers make them), with the installed
// kazoo, and with the fix proposed upstream applied to it.
var (
	kazooPerAcquire      = execlock.Spec("/usr/bin/python3", execlock.Adapters+"/kazoo_py.py", "--lock-per-acquire")
	kazooPerAcquireFixed = execlock.Spec("/usr/bin/python3", execlock.Adapters+"/kazoo_py.py", "--lock-per-acquire", "--fix=760")
)

// kazoo732 is kazoo's Lock, whose clean-up after a failed acquire
// swallows the error of a suspended connection and leaves its contender
// node in the queue, owned by a session that lives on.
var kazoo732 = scenario.Scenario{
	Name:    "kazoo-732",
	Summary: "a kazoo Lock's acquire times out while its connection is cut; its clean-up fails, the error is swallowed: its node stays in line and stalls the lock",
	Topic:   scenario.LockBugs,
	Bugs: []scenario.Bug{{Ref: "kazoo#732", URL: "https://github.com/python-zk/kazoo/issues/732",
		Seen:    "kazoo 2.8.0 (Debian's python3-kazoo)",
		Status:  "open; a fix is proposed in kazoo pull request 760",
		Recipes: []string{kazooPerAcquire}, Shows: []string{"ghost", "orphan"}, Ecosystem: "Python: kazoo (Lock)", Affected: "kazoo 2.8.0 (the code the report links); open upstream",
		Reproduced: "2026-11-26, seeds 1-10: 10 of 10 (20.9 s mean, 23.6 s max); the contrast 10 of 10 (25.5 s max)",
		Random: "4 of 5 on held-out seeds 326-330 (locktest power, 2026-11-27, a median 18.6 s to the first violation); 4 of 5 on each of two sets of tuning seeds (1-5: at 8.7-18.0 s; 6-10: at 13.1-28.4 s; locktest power, " +
			"2026-11-27), each the node the giving-up opening's waiter left in line (told as an orphan in 4, as a ghost its " +
			"client gave up behind in 4), since that opening comes right after the outage opening, strikes an " +
			"acquire begun since the fault before and holds the holder's release until its cut ends; with it last, behind " +
			"the outage and the other openings (it struck 26.5-29.1 s into the run): 3 of 5 on each (at 28.4-31.0 s), and 2 " +
			"of 5 on held-out seeds 301-305. Before the outage opening, " +
			"7 of 10 (seeds 1-10, locktest power: --nemesis all --time 30s, the default flags, 2026-11-27), each the " +
			"bug's: 5 an orphan (a LockTimeout refusal whose node stayed in line on a live session, still there when the " +
			"session made its next node), 2 a ghost; the giving-up opening made 6 of them, a member's pause under the owner's " +
			"connection 1. Before the orphan and the opening, 0 of 10 (seeds 1-10, the scenario's settings, no script): the " +
			"orphan's stall ends with the owner's session, about 7 s after it, and never outlasted the 7 s bound on an idle lock"}},
	Lesson: "When a kazoo Lock's acquire fails (its timeout ran out, or a non-blocking acquire found the lock held), it " +
		"deletes its contender node \"best effort\": an error of the connection (here the waiter's links are cut as its " +
		"wait runs out) is swallowed, and the acquire reports a plain timeout. The session lives on once the connection " +
		"is back, and so does the node: when it reaches the head of the queue nobody holds the lock and nobody gets it " +
		"until that session ends. The liveness check names the stall. The fix proposed upstream (kazoo pull request " +
		"760) retries the clean-up until it is done; with it applied (--fix=760) the lock keeps being granted.",
	// A 6 s session: kazoo drops a silent connection after two thirds of
	// it, after the waiter's wait (4 s, the op timeout's less 1 s) has run
	// out into the cut. The holder's section outlasts the cut; the quiet
	// period judges the stall.
	Run: scenario.Settings{Recipe: kazooPerAcquire, Backend: Name, Time: 5 * time.Second, Quiet: 10 * time.Second, Clients: 2, TTL: 6,
		ThinkMin: 6 * time.Second, Think: 6 * time.Second, Require: []string{histories.CheckLiveness}},
	Expect: map[string]map[string]string{
		scenario.Unfenced: {histories.CheckLiveness: scenario.Invalid},
		scenario.Fenced:   {histories.CheckLiveness: scenario.Invalid},
	},
	ByRecipe: map[string]map[string]string{
		kazooPerAcquireFixed: {histories.CheckLiveness: scenario.Valid},
	},
	Faults: func(scenario.Shape) []nemesis.Entry {
		// The waiter asked as the clients started and waits 4 s: its
		// links are cut before its wait runs out, so its clean-up's delete
		// goes into the cut, and healed half a second after, before the
		// op timeout (5 s): the closed connection fails the delete.
		return []nemesis.Entry{{At: 3 * time.Second, Fault: nemesis.Isolate, Target: nemesis.TargetWaiter, Fallback: "c1",
			Duration: 1500 * time.Millisecond}}
	},
}
