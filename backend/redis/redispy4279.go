package redis

import (
	"time"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/lock/execlock"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/scenario"
)

// The redis-py adapter as the scenario of redis-py#4279 runs it: a lock
// held until released (timeout=0) that a keep-alive thread renews with
// reacquire(), with the installed redis-py, and with the fix proposed
// upstream applied to it.
var (
	redisPyRenewed      = execlock.Spec("/usr/bin/python3", execlock.Adapters+"/redis_py.py", "--persistent", "--renew")
	redisPyRenewedFixed = execlock.Spec("/usr/bin/python3", execlock.Adapters+"/redis_py.py", "--persistent", "--renew", "--fix=4282")
)

// redisPy4279 is redis-py's Lock.reacquire, which on a lock with no
// timeout sends PEXPIRE 0: Redis deletes the key, and reacquire says it
// renewed the lock.
var redisPy4279 = scenario.Scenario{
	Name:    "redis-py-4279",
	Summary: "redis-py's Lock.reacquire of a lock held until released (timeout=0) deletes its key and says it renewed it: the next client is granted the lock beside its holder, with no fault at all",
	Topic:   scenario.LockBugs,
	Bugs: []scenario.Bug{{Ref: "redis-py#4279", URL: "https://github.com/redis/redis-py/issues/4279",
		Seen:    "redis-py 4.3.4 (Debian's python3-redis)",
		Status:  "open; a fix is proposed in redis-py pull request 4282",
		Recipes: []string{redisPyRenewed}, Ecosystem: "Python: redis-py (Lock)",
		Affected: "Lock.reacquire since it was added (redis-py pull request 1014) to 8.1.0 and master, as the report says; " +
			"4.3.4's extend(replace_ttl=True) refuses a lock with no TTL instead",
		Reproduced: "2026-11-26, seeds 1-10: 10 of 10 (12.3 s mean, 13.1 s max, at a load average of 8-14); the contrast 10 of 10 " +
			"(12.7 s max; its liveness, not required, invalid in 9: redis-py's lock polls every 100 ms and the client that " +
			"releases asks again at once, so the waiter starves)",
		Random: "10 of 10 (seeds 1-10, the scenario's settings, --nemesis all --time 30s, no script): mutex invalid in each; the " +
			"bug needs no fault (every section's first renewal deletes the key), so this says nothing of the faults"}},
	Lesson: "A redis-py Lock made with timeout=0 holds until released: its SET has no expiry. reacquire(), which resets " +
		"a lock's TTL to its timeout, checks only that the timeout is not None and sends PEXPIRE with 0 ms, and Redis " +
		"deletes a key whose expiry is not positive; the script then returns 1, and reacquire returns True. A service " +
		"that keeps its locks alive with reacquire (here a thread every third of a second) has deleted its own lock " +
		"at the first renewal and is told it still holds it: the next client is granted the lock beside it, and the " +
		"mutex check names the two holders. No fault is needed. The fix proposed upstream (redis-py pull request 4282) " +
		"makes the scripts never send a non-positive TTL; with it applied (--fix=4282) the lock stays until released.",
	// A 1 s TTL paces the renewal (every 333 ms); sections of 1-1.5 s
	// outlast the first renewal, and the waiter waits through them.
	Run: scenario.Settings{Recipe: redisPyRenewed, Backend: Name, Time: 3 * time.Second, Clients: 2, TTL: 1,
		ThinkMin: time.Second, Think: 1500 * time.Millisecond, Require: []string{histories.CheckMutex}},
	Expect: map[string]map[string]string{
		scenario.Unfenced: {histories.CheckMutex: scenario.Invalid},
		scenario.Fenced:   {histories.CheckMutex: scenario.Invalid},
	},
	ByRecipe: map[string]map[string]string{
		redisPyRenewedFixed: {histories.CheckMutex: scenario.Valid},
	},
	// No fault: the holder's own renewal deletes the lock.
	Faults: func(scenario.Shape) []nemesis.Entry { return nil },
}
