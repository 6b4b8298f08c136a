package redis

import (
	"time"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/lock/execlock"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/scenario"
)

// The Node redlock adapter's using() (auto-extended), on mike-marcacci's
// redlock 5.0.0-beta.2 (pinned as redlock-5.0.0-beta.2 by the adapters'
// package.json) and on @sesamecare-oss/redlock 1.4.0, its fork, which
// dates the expiration from the attempt that won.
var (
	redlockUsing5beta = execlock.Spec("node", execlock.Adapters+"/redlock.js", "--using", "--redlock=5.0.0-beta.2")
	redlockUsing      = execlock.Spec("node", execlock.Adapters+"/redlock.js", "--using")
)

// nodeRedlock296 is redlock 5.0.0-beta.2's acquire, which dates the lock's
// expiration from its first attempt: a lock won after retries longer than
// its duration is born expired, and using() never extends it.
var nodeRedlock296 = scenario.Scenario{
	Name:    "node-redlock-296",
	Summary: "Node redlock 5.0.0-beta.2: a lock won after retries longer than its TTL comes back already expired; using() never extends it, and the next client takes it mid-section",
	Topic:   scenario.LockBugs,
	Bugs: []scenario.Bug{{Ref: "node-redlock#296", URL: "https://github.com/mike-marcacci/node-redlock/issues/296",
		Seen:    "redlock 5.0.0-beta.2 (npm, pinned as redlock-5.0.0-beta.2 by " + execlock.Adapters + "/package.json)",
		Status:  "open; fixed in the repository (node-redlock pull request 274 for acquire, 276 for extend) but in no release: 5.0.0-beta.2 has neither (node-redlock#299); @sesamecare-oss/redlock, its fork, has the fix",
		Recipes: []string{redlockUsing5beta}, Shows: []string{"promise 7"}, Ecosystem: "Node: redlock (Redlock.using)",
		Affected:   "redlock 5.0.0-beta.1 and 5.0.0-beta.2 (npm), the releases of the v5 code; 4.2.0 (npm's latest) dates it from each attempt",
		Reproduced: "2026-11-26, seeds 1-10: 10 of 10 (13.6 s mean, 15.4 s max, at a load average of 20-36 on 2 cores); the contrast 10 of 10 (15.8 s max)",
		Random: "4 of 10 (seeds 1-10, the scenario's settings, --nemesis all --time 30s, no script): seeds 1, 3, 7 and 8 have an " +
			"overlap whose earlier holder's lock came back already expired (its lost event within 50 ms of the grant) with no " +
			"fault on that holder; mutex is invalid in 9 of 10, but the same sweep on 1.4.0 is invalid in 10 of 10 (the expiry " +
			"race of a 1 s TTL under pauses and slow links) with no such overlap: only those are the bug's. With locktest power (default flags: TTL 2 s, 5 clients, 20 ms sections and a tenth " +
			"slow ones of 2-4 s), by mutex: 3 of 5 on seeds 1-5, 2 of 5 on seeds 6-10 (2026-11-27, before promise 7). By contract, promise 7 " +
			"(a live grant is not called lost: the lock said lost less than half a TTL after the server took the " +
			"client's previous attempt, the key fresh on the server, nothing asked, no fault near; the observer reads " +
			"the server's MONITOR on its own clock): 4 of 5 on seeds 1-5 (median 10.8 s; seed 2 had no grant won " +
			"after a retry), 5 of 5 on seeds 6-10 (median 9.5 s); @sesamecare-oss/redlock 1.4.0, whose grants after a stall or a paused " +
			"server are called lost at once too, never breaks it (seeds 41-50)"}},
	Lesson: "redlock 5.0.0-beta.2 reads the clock once, before its first attempt, and sets the lock's expiration to that " +
		"time plus the duration, however long its retries took. A client that waited longer than the duration for the " +
		"lock (here the holder's links are slow, so that the waiter's retry wins the lock when the holder lets go) gets " +
		"a lock whose expiration is already past: using() tries to extend it at once, refuses (\"Cannot extend an " +
		"already-expired lock\"), aborts the routine's signal and never extends again. The key expires a TTL after the " +
		"grant while its holder is mid-section, and the slow client takes the lock: two holders, the mutex check. " +
		"@sesamecare-oss/redlock 1.4.0, a fork of the same code, dates the expiration from the attempt that won; " +
		"its using() keeps the key and the mutex holds. The contract check judges the grant itself (promise 7, a live " +
		"grant is not called lost): on the server's clock, the waiter's previous attempt was taken a few hundred " +
		"milliseconds before the lock called its fresh grant lost.",
	// A 1 s lock (using() extends it 500 ms before it expires) and 2.5 s
	// sections: a waiter retries (every 200 ms, 10 s at most) through a
	// whole section before it wins.
	Run: scenario.Settings{Recipe: redlockUsing5beta, Backend: Name, Time: 7 * time.Second, Quiet: 2 * time.Second, Clients: 2, TTL: 1,
		ThinkMin: 2500 * time.Millisecond, Think: 2500 * time.Millisecond, OpTimeout: 10 * time.Second, NoSlow: true,
		Require: []string{histories.CheckMutex}},
	// contract: promise 7, the grant called lost at once while its key
	// was fresh and the waiter untouched by the holder's slow links.
	Expect: map[string]map[string]string{
		scenario.Unfenced: {histories.CheckMutex: scenario.Invalid, histories.CheckContract: scenario.Invalid},
		scenario.Fenced:   {histories.CheckMutex: scenario.Invalid, histories.CheckContract: scenario.Invalid},
	},
	ByRecipe: map[string]map[string]string{
		redlockUsing: {histories.CheckMutex: scenario.Valid},
	},
	Faults: func(scenario.Shape) []nemesis.Entry {
		// The holder's links get 300 ms of latency mid-section: its
		// release and its next acquire arrive late, so the waiter's retry
		// (200 ms apart) wins the lock, after more than a TTL of retries.
		return []nemesis.Entry{{At: time.Second, Fault: nemesis.Slow, Target: nemesis.TargetHolder, Fallback: "c0", Duration: 6 * time.Second,
			Params: map[string]string{"link": "all", "toxic": "latency", "latency": "300ms", "jitter": "0s"}}}
	},
}
