package redis

import (
	"time"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/lock/execlock"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/scenario"
)

// The redis-py adapter as the scenario of redis-py#3847 runs it: a service
// that retries a release that failed on a connection error, with the
// installed redis-py, and with the upstream fix applied to it.
var (
	redisPyRetry      = execlock.Spec("/usr/bin/python3", execlock.Adapters+"/redis_py.py", "--retry-release")
	redisPyRetryFixed = execlock.Spec("/usr/bin/python3", execlock.Adapters+"/redis_py.py", "--retry-release", "--fix=4258")
)

// redisPy3847 is redis-py's Lock.release, which forgets its token before
// the round trip: a release that fails on a connection error can never be
// retried, and the key stays until its TTL, while the retry answers that
// the lock is unlocked.
var redisPy3847 = scenario.Scenario{
	Name:    "redis-py-3847",
	Summary: "redis-py's Lock.release fails on a connection error; it has already forgotten its token: the retry says the lock is unlocked without releasing it, the key stays until its TTL",
	Topic:   scenario.LockBugs,
	Bugs: []scenario.Bug{{Ref: "redis-py#3847", URL: "https://github.com/redis/redis-py/issues/3847",
		Seen: "redis-py 4.3.4 (Debian's python3-redis)", Fixed: true,
		Status:  "fixed for asyncio in redis-py pull request 3900, for the sync Lock in pull request 4258",
		Recipes: []string{redisPyRetry}, Shows: []string{"promise 6"}, Ecosystem: "Python: redis-py (Lock)",
		Affected:   "the sync Lock.release since redis-py pull request 489 (2014), until pull request 4258",
		Reproduced: "2026-11-26, seeds 1-10: 10 of 10 (13.7 s mean, 15.2 s max); the contrast 10 of 10 (15.4 s max)",
		Random: "5 of 5 (seeds 1-5, locktest power: default flags, TTL 2 s, --nemesis all --time 30s): contract invalid, " +
			"promise 6, each at the aimed schedule's lost release request (16.3-20.4 s, median 18.7 s): the retry answered " +
			"\"Cannot release an unlocked lock\" while the key stayed; 5 of 5 on seeds 6-10 (median 19.2 s). Before promise 6 and that opening's aim at a holder " +
			"entering a short section, 0 of 5: the 2 s key expires within the liveness bound, and the strike mostly met a " +
			"holder in a slow section whose key had expired already"}},
	Lesson: "redis-py's Lock.release sets its token to None before it sends the release: when the release fails on a " +
		"connection error (here the holder's links are cut while it releases, so the request never reaches Redis), the " +
		"key stays, and the lock object, which no longer knows its token, answers a retried release with \"Cannot " +
		"release an unlocked lock\", which the service takes at its word: released. Right after that release returned, " +
		"the server still holds the key with the grant's value: the contract check's promise 6 (a release that returned ok " +
		"took effect) is broken, whatever the TTL. Nobody can take the lock until the key's TTL runs out (a long one here, " +
		"20 s, as services set them): the liveness check names the stall. redis-py pull request 4258 keeps the token until the " +
		"release is done; with it applied (--fix=4258) the retry releases and the lock is granted at once.",
	// A key TTL far past the run's end: the stall the bug leaves lasts
	// that long. Holders hold 300-400 ms: the cut of the holder on its
	// grant holds its release.
	Run: scenario.Settings{Recipe: redisPyRetry, Backend: Name, Time: 3 * time.Second, Clients: 2, TTL: 20,
		ThinkMin: 300 * time.Millisecond, Think: 400 * time.Millisecond, Require: []string{histories.CheckLiveness}},
	Expect: map[string]map[string]string{
		scenario.Unfenced: {histories.CheckLiveness: scenario.Invalid, histories.CheckContract: scenario.Invalid},
		scenario.Fenced:   {histories.CheckLiveness: scenario.Invalid, histories.CheckContract: scenario.Invalid},
	},
	// The fix keeps promise 6 too, but Redis orders no grant against a
	// deletion: its contract is unknown (promises 2 and 3 unjudged), and a
	// contrast expects valid verdicts only.
	ByRecipe: map[string]map[string]string{
		redisPyRetryFixed: {histories.CheckLiveness: scenario.Valid},
	},
	Faults: func(scenario.Shape) []nemesis.Entry {
		// The next holder's links are cut on its grant, for longer than
		// its section: its release is sent into the cut and fails when
		// the cut ends (the held connection closes).
		return []nemesis.Entry{scenario.Holder(nemesis.Entry{At: time.Second, Fault: nemesis.Isolate, Duration: 1500 * time.Millisecond})}
	},
}
