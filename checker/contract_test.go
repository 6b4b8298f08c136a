package checker

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/locktest/locktest/histories"
)

// grant adds an acquire of lock "lock" by process p, granted token on a
// state at revision rev, holding etcd key claim ("" for a lock that does
// not say).
func (h *hist) grant(p int, inv, ret, token, rev int64, claim string) *hist {
	return h.op(p, "lock", histories.Acquire, inv, ret, ok, nil, histories.GrantValue(token, rev, claim))
}

// deleted adds the observer's record of the deletion of the key of token at
// revision rev.
func (h *hist) deleted(at int64, owner string, token, rev int64, by string, extra ...string) *hist {
	params := map[string]string{"key": "lock", "create_revision": strconv.FormatInt(token, 10),
		"revision": strconv.FormatInt(rev, 10), "by": by}
	for i := 0; i+1 < len(extra); i += 2 {
		params[extra[i]] = extra[i+1]
	}
	return h.event("key-deleted", at, []string{owner}, params)
}

// recorded adds what a current run records around its operations: the
// setup (TTL 2 s), the process events and the observer's last revision.
func (h *hist) recorded(observed int64, procs ...int) *hist {
	h.event("setup", 0, nil, map[string]string{"ttl": "2", "recipe": "test", histories.SetupStalls: histories.StallsWatched})
	for _, p := range procs {
		h.event("process", 0, []string{"c" + strconv.Itoa(p)}, map[string]string{"process": strconv.Itoa(p)})
	}
	return h.event("observed", 100000, nil, map[string]string{"revision": strconv.FormatInt(observed, 10)})
}

// twoHolders: c1 holds token 10 (granted on revision 10) until 2 s; c2,
// queued, is granted token 12 at 2.1 s on a state at revision 13.
func twoHolders() *hist {
	return (&hist{}).recorded(100, 1, 2).
		grant(1, 1000, 1100, 10, 10, "/l/lock/a").
		grant(2, 1050, 2100, 12, 13, "/l/lock/b").
		rel(1, "lock", 2000, 2010, ok).
		deleted(2005, "c1", 10, 13, "release").
		rel(2, "lock", 3000, 3010, ok).
		deleted(3005, "c2", 12, 14, "release")
}

func TestContractValid(t *testing.T) {
	r := Contract(twoHolders().ops())
	expect(t, r, Valid)
	if r.Ops != 2 || r.LeaseRaces != 0 || r.LockBugs != 0 {
		t.Errorf("result %+v", r)
	}
}

func TestContractTokensGrow(t *testing.T) {
	// c3 asks after c2's grant of token 12 returned, and gets token 11.
	h := twoHolders().recorded(100, 3).grant(3, 4000, 4100, 11, 15, "/l/lock/c").rel(3, "lock", 4200, 4210, ok).deleted(4205, "c3", 11, 16, "release")
	r := Contract(h.ops())
	expect(t, r, Invalid, `Promise 1 (tokens grow): on key "lock", process 3 (c3) was granted token 11 at 4.10 s (invoked 4.00 s), but process 2 (c2) had been granted the higher or equal token 12 at 2.10 s.`)
	if r.Violations[0].Kind != "promise 1" {
		t.Errorf("kind %q", r.Violations[0].Kind)
	}
}

// A token handed out again after a crash of the server that kept the
// counter: the story names the crash, which a reader needs to see why.
func TestContractTokensGrowNamesTheFault(t *testing.T) {
	h := twoHolders().recorded(100, 3).fault("crash-member", []string{"r0"}, 2500, 3900).
		grant(3, 4000, 4100, 1, 15, "/l/lock/c").rel(3, "lock", 4200, 4210, ok).deleted(4205, "c3", 1, 16, "release")
	expect(t, Contract(h.ops()), Invalid, `process 3 (c3) was granted token 1 at 4.10 s (invoked 4.00 s), but process 2 (c2) had been granted the higher or equal token 12 at 2.10 s; faults active then: fault crash-member on r0 was active 2.50-3.90 s.`)
}

func TestContractGrantOfLostLock(t *testing.T) {
	// c2's key (token 12) expired at revision 13, while it waited; it was
	// granted on a state at revision 14 anyway: etcd#11456.
	h := (&hist{}).recorded(100, 1, 2).
		grant(1, 1000, 1100, 10, 10, "/l/lock/a").
		grant(2, 1050, 2100, 12, 14, "/l/lock/b").
		deleted(1900, "c2", 12, 13, "expiry", "lease_alive", "false").
		fault("pause-client", []string{"c2"}, 1200, 1800).
		rel(1, "lock", 2000, 2010, ok).
		deleted(2005, "c1", 10, 14, "release").
		rel(2, "lock", 3000, 3010, ok)
	expect(t, Contract(h.ops()), Invalid,
		`Promise 2 (no grant of a lost lock): on key "lock", process 2 (c2) was granted token 12 at 2.10 s (asked at 1.05 s) on a state at revision 14, but the server had deleted its key (token 12) at revision 13 (1.90 s): its lease expired while it waited: it was granted a lock whose key was already gone; faults active then: fault pause-client on c2 was active 1.20-1.80 s.`)

	// The same loss after the decision (revision 13) is the lease race.
	h = (&hist{}).recorded(100, 1, 2).
		grant(1, 1000, 1100, 10, 10, "/l/lock/a").
		rel(1, "lock", 2000, 2010, ok).
		deleted(2005, "c1", 10, 13, "release").
		grant(2, 1050, 2100, 12, 13, "/l/lock/b").
		fault("pause-client", []string{"c2"}, 2200, 5000).
		deleted(4500, "c2", 12, 14, "expiry", "lease_alive", "false").
		rel(2, "lock", 5000, 5010, ok)
	expect(t, Contract(h.ops()), Valid)
}

// overlapping: c1 holds token 10 and is paused; c2 is granted token 12 on a
// state at revision 13 while c1 still believes it holds the lock; c1's key
// is deleted at revision deletedAt.
func overlapping(deletedAt int64) *hist {
	return (&hist{}).recorded(100, 1, 2).
		grant(1, 1000, 1100, 10, 10, "/l/lock/a").
		fault("pause-client", []string{"c1"}, 1200, 4000).
		deleted(1900, "c1", 10, deletedAt, "expiry", "lease_alive", "false").
		grant(2, 1050, 2100, 12, 13, "/l/lock/b").
		rel(2, "lock", 3000, 3010, ok).
		deleted(3005, "c2", 12, 15, "release").
		rel(1, "lock", 4100, 4110, ok)
}

func TestContractOverlapOnlyAfterLoss(t *testing.T) {
	r := Contract(overlapping(11).ops())
	expect(t, r, Valid)
	if r.LeaseRaces != 1 || r.LockBugs != 0 {
		t.Errorf("races %d, bugs %d; want 1, 0", r.LeaseRaces, r.LockBugs)
	}
	r = Contract(overlapping(14).ops())
	expect(t, r, Invalid, `Promise 3 (overlap only after loss): on key "lock", process 1 (c1) (token 10, granted 1.10 s) and process 2 (c2) (token 12, granted 2.10 s on a state at revision 13) both held the lock from 2.10 s to 3.00 s, but process 1 (c1)'s key (token 10) was deleted only at revision 14 (1.90 s): its lease expired`)
	if r.LeaseRaces != 0 || r.LockBugs != 1 {
		t.Errorf("races %d, bugs %d; want 0, 1", r.LeaseRaces, r.LockBugs)
	}
}

func TestContractReleaseOnlyYourOwn(t *testing.T) {
	// c1, paused past its lease, comes back and its release deletes c3's
	// key.
	h := overlapping(11).recorded(100, 3).
		grant(3, 3000, 3500, 16, 16, "/l/lock/c").
		deleted(4150, "c3", 16, 17, "other-release", "released_by", "c1", "released_token", "10", "lease_alive", "true").
		rel(3, "lock", 5000, 5010, ok)
	expect(t, Contract(h.ops()), Invalid,
		`Promise 4 (release only your own): on key "lock", the release of token 10 by process 1 (c1) (invoked 4.10 s) deleted process 3 (c3)'s key (token 16, granted 3.50 s) at revision 17 (4.15 s), while c3's lease was alive.`)
}

// An overlap whose first holder's key another grant's release deleted is no
// lease race: the lock broke promise 4, and the overlap counts as its bug.
func TestContractOverlapAfterOtherRelease(t *testing.T) {
	h := overlapping(11).recorded(100, 3).
		grant(3, 3000, 3500, 16, 16, "/l/lock/c").
		deleted(4150, "c3", 16, 17, "other-release", "released_by", "c1", "released_token", "10", "lease_alive", "true").
		grant(2, 4200, 4300, 18, 18, "/l/lock/b").
		rel(2, "lock", 4400, 4410, ok).
		deleted(4405, "c2", 18, 19, "release").
		rel(3, "lock", 5000, 5010, ok)
	r := Contract(h.ops())
	expect(t, r, Invalid,
		`Promise 4 (release only your own): on key "lock", the release of token 10 by process 1 (c1) (invoked 4.10 s) deleted process 3 (c3)'s key (token 16, granted 3.50 s) at revision 17 (4.15 s), while c3's lease was alive.`)
	if r.LeaseRaces != 2 || r.LockBugs != 1 {
		t.Errorf("races %d, bugs %d; want 2 (c1's lapse, against c2 and c3), 1 (c3's key deleted by c1's release)", r.LeaseRaces, r.LockBugs)
	}
}

func TestContractLiveHolderKeepsClaim(t *testing.T) {
	// c1 holds from 1.1 s to 9 s; its lease expires at 8 s with no fault
	// anywhere: no-renew.
	h := (&hist{}).recorded(100, 1).
		grant(1, 1000, 1100, 10, 10, "/l/lock/a").
		deleted(8000, "c1", 10, 11, "expiry", "lease_alive", "false").
		rel(1, "lock", 9000, 9010, ok)
	expect(t, Contract(h.ops()), Invalid,
		`Promise 5 (a live holder keeps its claim): on key "lock", the lease of process 1 (c1), which held token 10 since 1.10 s, expired on the server: its key was deleted at revision 11 (8.00 s), and no fault was active in the 6s before.`)

	// A fault on another client reaches that client's session alone: no
	// excuse (no-renew under --nemesis all, whose faults leave few windows
	// of two TTLs free of any fault).
	others := func() *hist {
		return (&hist{}).recorded(100, 1, 2).
			grant(1, 1000, 1100, 10, 10, "/l/lock/a").
			deleted(8000, "c1", 10, 11, "expiry", "lease_alive", "false").
			rel(1, "lock", 9000, 9010, ok).
			fault("pause-client", []string{"c2"}, 5000, 7000).
			fault("lease-revoke", []string{"c2"}, 7500, 7500)
	}
	expect(t, Contract(others().ops()), Invalid,
		`Promise 5 (a live holder keeps its claim): on key "lock", the lease of process 1 (c1), which held token 10 since 1.10 s, expired on the server: its key was deleted at revision 11 (8.00 s), and no fault was active in the 6s before but on other clients, which reach their own sessions only.`)

	// A fault within two TTLs and the slack of the expiry excuses it: on
	// the holder, on a member, or on targets the history does not name as
	// clients.
	for _, targets := range [][]string{{"c1"}, {"c2", "c1"}, {"m0"}, nil, {"c3"}} {
		expect(t, Contract(others().fault("slow", targets, 2000, 2500).ops()), Valid)
	}
	h.fault("slow", []string{"c1"}, 2000, 2500)
	expect(t, Contract(h.ops()), Valid)

	// Without the observer's word that the lease was gone, it is unknown.
	h = (&hist{}).recorded(100, 1).
		grant(1, 1000, 1100, 10, 10, "/l/lock/a").
		deleted(8000, "c1", 10, 11, "expiry").
		rel(1, "lock", 9000, 9010, ok)
	r := Contract(h.ops())
	expect(t, r, Unknown, "Promise 5 (a live holder keeps its claim) could not be judged")
}

// A pg-lease sweep (seed 1): c2 was granted token 137 at 37.37 s and
// began a slow section; locktest's process then did not run for about two
// seconds (the waiters' op timeouts, due at 38.56 s and 38.91 s, were
// recorded at 39.53 s), so its watchdog sent no renewal and the lease
// expired on the server's clock with no fault. The host's stall is no
// broken promise, and cannot be told from a pause: unknown, with why.
func TestContractStalledHolder(t *testing.T) {
	stalled := func(stall bool) *hist {
		h := (&hist{}).recorded(100, 2).
			grant(2, 37368, 37369, 137, 137, "/l/lock/a")
		if stall {
			h.event(histories.FStall, 39520, nil, map[string]string{"duration_ns": "1980000000"})
		}
		return h.deleted(39525, "c2", 137, 138, "expiry", "lease_alive", "false").
			rel(2, "lock", 40693, 40810, ok)
	}
	expect(t, Contract(stalled(false).ops()), Invalid, "Promise 5 (a live holder keeps its claim)")
	r := Contract(stalled(true).ops())
	expect(t, r, Unknown, "Promise 5 (a live holder keeps its claim) could not be judged: the lease of token 137 held by process 2 (c2) expired on the server at 39.52 s, but locktest's own process, its client's, was not run for 1.98s in the 6s before (the longest stall 1.98s, from 37.54 s to 39.52 s)")
	if !slices.Contains(r.Unjudged, promiseLive) {
		t.Errorf("unjudged %q, want promise 5 among them", r.Unjudged)
	}
	// A history that does not say locktest watched for stalls cannot
	// rule one out.
	unwatched := slices.DeleteFunc(stalled(false).ops(), func(op histories.Op) bool { return op.F == histories.FSetup })
	unwatched = append([]histories.Op{{Type: histories.Info, F: histories.FSetup, Process: histories.Nemesis,
		Value: &histories.Value{Params: map[string]string{"ttl": "2"}}}}, unwatched...)
	expect(t, Contract(unwatched), Unknown, "does not say that locktest watched its own process for stalls")
	// Nor one whose lock runs in a process of its own (exec:): locktest
	// watched its own process only.
	elsewhere := stalled(false).ops()
	elsewhere[0].Value.Params[histories.SetupStalls] = histories.StallsNotTheLocks
	expect(t, Contract(elsewhere), Unknown, "the lock runs in a process of its own, whose stalls locktest cannot see")
	// Stalls that add up to less than a quarter of the TTL (here 2 s)
	// excuse nothing: a healthy lock renews with more to spare.
	stalls := func(second string) []histories.Op {
		return (&hist{}).recorded(100, 2).
			grant(2, 37368, 37369, 137, 137, "/l/lock/a").
			event(histories.FStall, 38000, nil, map[string]string{"duration_ns": "300000000"}).
			event(histories.FStall, 39000, nil, map[string]string{"duration_ns": second}).
			deleted(39525, "c2", 137, 138, "expiry", "lease_alive", "false").
			rel(2, "lock", 40693, 40810, ok).ops()
	}
	expect(t, Contract(stalls("199000000")), Invalid, "Promise 5 (a live holder keeps its claim)")
	expect(t, Contract(stalls("200000000")), Unknown, "was not run for 500ms in the 6s before (the longest stall 300ms, from 37.70 s to 38.00 s)")
	// A stall long before the expiry's window excuses nothing.
	h := (&hist{}).recorded(100, 2).
		event(histories.FStall, 1000, nil, map[string]string{"duration_ns": "900000000"}).
		grant(2, 37368, 37369, 137, 137, "/l/lock/a").
		deleted(39525, "c2", 137, 138, "expiry", "lease_alive", "false").
		rel(2, "lock", 40693, 40810, ok)
	expect(t, Contract(h.ops()), Invalid, "Promise 5 (a live holder keeps its claim)")
}

func TestContractUnknown(t *testing.T) {
	// An old history: tokens only, no revisions, keys, TTL or observer.
	old := (&hist{}).acq(1, "lock", 1000, 1100, ok, 10).rel(1, "lock", 2000, 2010, ok).
		acq(2, "lock", 1050, 2100, ok, 12).rel(2, "lock", 3000, 3010, ok)
	r := Contract(old.ops())
	expect(t, r, Unknown, "Promise 2 (no grant of a lost lock) could not be judged: the grants carry no decision revision")
	if want := []string{promiseLost, promiseRelease, promiseLive}; !slices.Equal(r.Unjudged, want) {
		t.Errorf("unjudged %q, want %q", r.Unjudged, want)
	}
	// A promise it can judge still breaks.
	expect(t, Contract(old.acq(3, "lock", 4000, 4100, ok, 11).ops()), Invalid, "Promise 1 (tokens grow)")

	// A lock that does not say which key it holds (no etcdlock.Keyed).
	h := (&hist{}).recorded(100, 1).grant(1, 1000, 1100, 10, 10, "").rel(1, "lock", 2000, 2010, ok)
	expect(t, Contract(h.ops()), Unknown, "which key a grant holds (lock.Keyed)")

	// No grant at all is never valid.
	expect(t, Contract((&hist{}).recorded(100).acq(1, "lock", 1000, 2000, fail, 0).ops()), Unknown, "holds no grant")

	// A claim with no deletion is judged held only up to the observed
	// revision (and at its own).
	h = (&hist{}).recorded(5, 1).grant(1, 1000, 1100, 10, 12, "/l/lock/a")
	expect(t, Contract(h.ops()), Unknown, "does not say whether the key of token 10 was deleted by revision 12")
	expect(t, Contract((&hist{}).recorded(5, 1).grant(1, 1000, 1100, 10, 10, "/l/lock/a").ops()), Valid)
}

// On a server without revisions, promises 4 and 5 speak of the key's TTL,
// and promises 2 and 3 are not judged.
func TestContractBackendWording(t *testing.T) {
	contract := func(h *hist) Result { return withTerms(h.ops(), "ttl-store", ttlTerms).Contract() }
	redis := func() *hist {
		return (&hist{}).event("setup", 0, nil, map[string]string{"ttl": "2", "recipe": "ttl-del", "backend": "ttl-store", histories.SetupStalls: histories.StallsWatched}).
			clientOf(1, "c1").clientOf(3, "c3").
			event("observed", 100000, nil, nil)
	}
	redisDeleted := func(h *hist, at int64, owner string, token int64, by string, extra ...string) *hist {
		params := map[string]string{"key": "lock", "create_revision": strconv.FormatInt(token, 10), "by": by}
		for i := 0; i+1 < len(extra); i += 2 {
			params[extra[i]] = extra[i+1]
		}
		return h.event("key-deleted", at, []string{owner}, params)
	}
	h := redis().acq(1, "lock", 1000, 1100, ok, 1).acq(3, "lock", 3000, 3500, ok, 2)
	redisDeleted(h, 4150, "c3", 2, "other-release", "released_by", "c1", "released_token", "1")
	h.rel(1, "lock", 4100, 4200, ok).rel(3, "lock", 5000, 5010, ok)
	r := contract(h)
	expect(t, r, Invalid, `at 4.15 s, before c3's key had expired (TTL).`)
	if !slices.Contains(r.Unjudged, promiseLost) || !strings.Contains(r.Explanation, "the server has no revisions") {
		t.Errorf("promise 2 judged on a server without revisions: unjudged %v: %s", r.Unjudged, r.Explanation)
	}

	h = redis().acq(1, "lock", 1000, 1100, ok, 1)
	redisDeleted(h, 8000, "c1", 1, "expiry", "lease_alive", "false")
	h.rel(1, "lock", 9000, 9010, ok)
	expect(t, contract(h), Invalid,
		`on key "lock", the key of process 1 (c1), which held token 1 since 1.10 s, expired on the server: its key was deleted at 8.00 s, and no fault`)

	// An expiry put down to a grant whose acquire began less than a TTL
	// before it was of another key (redis-setnx seed 48: an acquire whose
	// reply was lost set a key, which expired as the next grant came):
	// no broken promise 5, and the check says why.
	h = redis().acq(1, "lock", 7900, 8000, ok, 1)
	redisDeleted(h, 8000, "c1", 1, "expiry", "lease_alive", "false")
	h.rel(1, "lock", 9000, 9010, ok)
	expect(t, contract(h), Unknown, "could not expire before 9.90 s: it was another key")

	// The server's set, where a key-set event tells it, bounds the key's
	// life where the acquire's invocation is long before (redis-setnx seed
	// 479: asked 22.7 s before its grant, whose key was set 1 ms before
	// another's expiry); a set a TTL before the expiry still breaks it.
	set := func(h *hist, at int64) *hist {
		return h.event(histories.FKeySet, 90000, []string{"c1"}, map[string]string{"key": "lock", "process": "1", "server": "r0",
			"ttl_ms": "2000", "set_ns": strconv.FormatInt(at*1e6, 10)})
	}
	h = redis().acq(1, "lock", 1000, 8000, ok, 1)
	redisDeleted(h, 8000, "c1", 1, "expiry", "lease_alive", "false")
	h.rel(1, "lock", 9000, 9010, ok)
	set(h, 7999)
	expect(t, contract(h), Unknown, "its key, set on the server at 8.00 s, could not expire before 10.00 s: it was another key")
	h = redis().acq(1, "lock", 1000, 6000, ok, 1)
	redisDeleted(h, 8000, "c1", 1, "expiry", "lease_alive", "false")
	h.rel(1, "lock", 9000, 9010, ok)
	set(h, 5999)
	expect(t, contract(h), Invalid, "its key was deleted at 8.00 s, and no fault")
}

// A recipe whose token is no fencing token (Redlock's count after the
// grant) promises nothing of its order: a repeated token is not judged a
// broken promise 1, and the check says why.
func TestContractNoFencingToken(t *testing.T) {
	h := func(fencing string) *hist {
		params := map[string]string{"ttl": "2", "recipe": "redlock", "backend": "redis"}
		if fencing != "" {
			params["fencing_token"] = fencing
		}
		h := (&hist{}).event("setup", 0, nil, params).clientOf(1, "c1").clientOf(3, "c3").event("observed", 100000, nil, nil)
		h.acq(1, "lock", 1000, 1100, ok, 5).rel(1, "lock", 2000, 2010, ok)
		h.acq(3, "lock", 3000, 3100, ok, 5).rel(3, "lock", 4000, 4010, ok)
		return h
	}
	expect(t, Contract(h("").ops()), Invalid, "the higher or equal token 5")
	r := Contract(h("false").ops())
	if r.Verdict == Invalid || !slices.Contains(r.Unjudged, promiseTokens) || !strings.Contains(r.Explanation, "no fencing token") {
		t.Errorf("repeated tokens of a recipe without a fencing token: %s, unjudged %v: %s", r.Verdict, r.Unjudged, r.Explanation)
	}
}

// The mutex check of a recipe whose token is no fencing token checks
// exclusion only: tokens going back without two holders is no violation;
// two holders still are.
func TestMutexNoFencingToken(t *testing.T) {
	h := func(fencing string, overlap bool) *hist {
		params := map[string]string{"ttl": "2", "recipe": "redlock", "backend": "redis"}
		if fencing != "" {
			params["fencing_token"] = fencing
		}
		h := (&hist{}).event("setup", 0, nil, params).clientOf(1, "c1").clientOf(3, "c3")
		h.acq(1, "lock", 1000, 1100, ok, 5).rel(1, "lock", 2000, 2010, ok)
		if overlap {
			h.acq(3, "lock", 1500, 1600, ok, 3).rel(3, "lock", 4000, 4010, ok)
		} else {
			h.acq(3, "lock", 3000, 3100, ok, 3).rel(3, "lock", 4000, 4010, ok)
		}
		return h
	}
	mutex := func(h *hist) Result { return Build(h.ops()).Mutex(Options{}) }
	expect(t, mutex(h("", false)), Invalid, "tokens must grow")
	if r := mutex(h("false", false)); r.Verdict != Valid {
		t.Errorf("tokens going back, one holder at a time, no fencing token: %s: %s", r.Verdict, r.Explanation)
	}
	expect(t, mutex(h("false", true)), Invalid, "both believed they held the lock")
}

// retried: c1's release of token 10 is applied but its reply is lost (info);
// c1, as process 3, is granted token 12 on the same key (etcd's Mutex names
// it after the session's lease), and its retried release of token
// releasedToken deletes that key while c1 goes on holding it; c2 is granted
// next: etcd#22082.
func retried(releasedToken string) *hist {
	return (&hist{}).recorded(100, 1, 2).clientOf(3, "c1").
		grant(1, 1000, 1100, 10, 10, "/l/lock/a").
		rel(1, "lock", 2000, 2300, info).
		deleted(2005, "c1", 10, 11, "release").
		grant(3, 2400, 2500, 12, 12, "/l/lock/a").
		deleted(2600, "c1", 12, 13, "other-release", "released_by", "c1", "released_token", releasedToken, "lease_alive", "true").
		grant(2, 1050, 2700, 14, 14, "/l/lock/b").
		rel(2, "lock", 2800, 2810, ok).
		deleted(2805, "c2", 14, 15, "release").
		rel(3, "lock", 3000, 3010, ok)
}

// A client's retried release of its older grant that deletes its newer
// grant's key breaks promise 4, and the overlap it leads to is the lock's
// bug; the observer's word that the owner's own release of that same grant
// was another's is no evidence either way.
func TestContractRetriedRelease(t *testing.T) {
	r := Contract(retried("10").ops())
	expect(t, r, Invalid, `Promise 4 (release only your own): on key "lock", the release of token 10 by process 1 (c1) (invoked 2.00 s; its client never learned its outcome) deleted process 3 (c1)'s key (token 12, granted 2.50 s) at revision 13 (2.60 s)`)
	if r.LeaseRaces != 0 || r.LockBugs != 1 {
		t.Errorf("races %d, bugs %d; want 0, 1", r.LeaseRaces, r.LockBugs)
	}
	expect(t, Contract(retried("12").ops()), Unknown, "the release was its owner's own")
}

// A backend's words for what a grant holds and for its order of changes
// (a znode, a zxid) are the contract's stories' words.
func TestContractWords(t *testing.T) {
	ops := overlapping(14).event("setup", 0, nil, map[string]string{"backend": "znode-store", "ttl": "2"}).ops()
	words := LeaseTerms
	words.Key, words.Revision = "znode", "zxid"
	r := withTerms(ops, "znode-store", words).Contract()
	expect(t, r, Invalid, `granted 2.10 s on a state at zxid 13) both held the lock from 2.10 s to 3.00 s, but process 1 (c1)'s znode (token 10) was deleted only at zxid 14 (1.90 s)`)
	if strings.Contains(r.Explanation, "revision") || strings.Contains(r.Explanation, "'s key") {
		t.Errorf("the story speaks of keys and revisions: %s", r.Explanation)
	}
}

// grantRead adds a grant that does not tell its decision revision, with
// revMax, the revision locktest read after its reply.
func (h *hist) grantRead(p int, inv, ret, token, revMax int64, claim string) *hist {
	v := histories.GrantValue(token, 0, claim)
	v.RevisionMax = &revMax
	return h.op(p, "lock", histories.Acquire, inv, ret, ok, nil, v)
}

// Promise 3 judged from the bounds locktest takes itself, for a lock that
// tells no decision revision: c1 holds token 10; c2's key is created at
// revision 12 and it is granted at 2.1 s; locktest read revision 14 after
// the reply.
func TestContractBounds(t *testing.T) {
	overlap := func(deleteAt, deleteRev int64, by string, releaseAt int64) *hist {
		return (&hist{}).recorded(100, 1, 2).
			grantRead(1, 1000, 1100, 10, 10, "/l/lock/a").
			grantRead(2, 1050, 2100, 12, 14, "/l/lock/b").
			rel(1, "lock", releaseAt, releaseAt+10, ok).
			deleted(deleteAt, "c1", 10, deleteRev, by, "lease_alive", "false").
			rel(2, "lock", 6000, 6010, ok).
			deleted(6005, "c2", 12, 20, "release")
	}
	for name, tc := range map[string]struct {
		h     *hist
		want  Verdict
		class string
		says  string
	}{
		// The read after the reply still saw c1's key: it was on the
		// server at the decision, which came before the read.
		"alive at the read": {overlap(5005, 17, "release", 5000), Invalid, ClassLockBug, "locktest read revision 14 after the reply"},
		// c1's key was gone before c2's own key was created: the race.
		"gone before": {overlap(1500, 11, "expiry", 5000).fault("pause-client", []string{"c1"}, 1200, 4000), Valid, ClassLeaseRace, ""},
		// Deleted between the bounds, by a release invoked only after
		// the reply: real-time order says it was alive at the decision.
		"released after the reply": {overlap(2205, 13, "release", 2200), Invalid, ClassLockBug, "by real-time order"},
		// Deleted by expiry between c2's key's creation and the read: the
		// decision may be either side.
		"expired between the bounds": {overlap(2205, 13, "expiry", 2200), Unknown, ClassUndecided, "the decision lies between"},
	} {
		t.Run(name, func(t *testing.T) {
			r := Contract(tc.h.ops())
			expect(t, r, tc.want, tc.says)
			if len(r.Overlaps) != 1 || r.Overlaps[0].Class != tc.class {
				t.Errorf("classes %+v, want one %s", r.Overlaps, tc.class)
			}
			if got := r.LeaseRaces + r.LockBugs + r.Undecided; got != 1 {
				t.Errorf("%d races, %d bugs, %d undecided: want one overlap", r.LeaseRaces, r.LockBugs, r.Undecided)
			}
		})
	}
	// On a backend whose "release" is only the owner's session deleting
	// its node (ZooKeeper's observer), real-time order says nothing.
	zk := LeaseTerms
	zk.ReleaseByCall = false
	r := withTerms(overlap(2205, 13, "release", 2200).ops(), "", zk).Contract()
	expect(t, r, Unknown, "the decision lies between")
	// A grant without a decision revision or a read after it says nothing
	// of its token: undecided, never a bug.
	h := (&hist{}).recorded(100, 1, 2).
		grant(1, 1000, 1100, 10, 0, "/l/lock/a").
		grant(2, 1050, 2100, 12, 0, "/l/lock/b").
		rel(1, "lock", 5000, 5010, ok).deleted(5005, "c1", 10, 17, "release").
		rel(2, "lock", 6000, 6010, ok).deleted(6005, "c2", 12, 20, "release")
	expect(t, Contract(h.ops()), Unknown, "no revision_max read by locktest after the reply")
}

// A lock without tokens (kazoo's) is judged by its claims' creation
// points, read from the servers (claim_created), never by tokens: promise
// 1 stays unjudged, promise 3 is judged.
func TestContractClaimCreated(t *testing.T) {
	grant := func(p int, inv, ret, created, revMax int64, claim string) func(h *hist) *hist {
		return func(h *hist) *hist {
			v := &histories.Value{Claim: claim, ClaimCreated: &created, RevisionMax: &revMax}
			return h.op(p, "lock", histories.Acquire, inv, ret, ok, nil, v)
		}
	}
	h := (&hist{}).recorded(100, 1, 2)
	h = grant(1, 1000, 1100, 10, 10, "/l/lock/n-1")(h)
	h = grant(2, 1050, 2100, 12, 14, "/l/lock/n-2")(h)
	h.rel(1, "lock", 5000, 5010, ok).deleted(5005, "c1", 10, 17, "release").
		rel(2, "lock", 6000, 6010, ok).deleted(6005, "c2", 12, 20, "release")
	r := Contract(h.ops())
	expect(t, r, Invalid, "Promise 3 (overlap only after loss)", "Promise 1 (tokens grow) could not be judged: a grant carries no token")
	if r.LockBugs != 1 {
		t.Errorf("%d bugs, want 1", r.LockBugs)
	}
}

// A release that returned ok while the server kept its grant's key
// (redis-py#3847's retried release, which its Lock answers "unlocked"
// without sending it) broke promise 6; the observer's key-kept event after
// a release whose outcome is unknown judges nothing.
func TestContractReleaseTookEffect(t *testing.T) {
	h := func(release histories.Type) *hist {
		h := (&hist{}).recorded(100, 1, 2).
			grant(1, 1000, 1100, 10, 10, "").
			rel(1, "lock", 2000, 2600, release).
			event("key-kept", 2590, []string{"c1"}, map[string]string{"key": "lock", "process": "1", "server": "r0"}).
			deleted(3100, "c1", 10, 11, "expiry", "lease_alive", "false")
		if release == ok {
			h.grant(2, 1500, 3150, 12, 12, "").rel(2, "lock", 4000, 4010, ok).deleted(4005, "c2", 12, 13, "release")
		}
		return h
	}
	r := Contract(h(ok).ops())
	expect(t, r, Invalid, `Promise 6 (a release that returned ok took effect): on key "lock", the release by process 1 (c1) invoked at 2.00 s returned ok at 2.60 s, but right after it the server still held its key, with the value its grant set: the release did not take effect.`)
	if len(r.Violations) != 1 || r.Violations[0].Kind != "promise 6" {
		t.Errorf("violations %+v, want one of promise 6", r.Violations)
	}
	if r := Contract(h(info).ops()); slices.ContainsFunc(r.Violations, func(v Violation) bool { return v.Kind == "promise 6" }) {
		t.Errorf("a release of unknown outcome judged by promise 6: %s", r.Explanation)
	}
}

// freshGrant: c1 asks for the lock at 1 s and is granted it at 3.3 s; the
// server took its previous attempt at 3.1 s and set its key at 3.29 s with
// a 2 s TTL; the lock says lost at lost (ms); c1 releases at 3.35 s, the
// request reaching the server at 3.4 s. change edits the key-set event's
// params (ms, or "" to drop one).
func freshGrant(lost int64, change map[string]string) *hist {
	params := map[string]string{"key": "lock", "process": "1", "server": "r0", "ttl_ms": "2000",
		"set_ns": "3290", "asked_ns": "3100", "next_ns": "3400", "changed_ns": "3405"}
	for k, v := range change {
		params[k] = v
	}
	for k, v := range params {
		if strings.HasSuffix(k, "_ns") {
			if v == "" {
				delete(params, k)
				continue
			}
			n, _ := strconv.ParseInt(v, 10, 64)
			params[k] = strconv.FormatInt(n*ms, 10)
		}
	}
	return (&hist{}).recorded(0, 1, 2).
		op(1, "lock", histories.Acquire, 1000, 3300, ok, nil, &histories.Value{}).
		event(histories.FLeaseLost, lost, []string{"c1"}, map[string]string{"key": "lock", "process": "1"}).
		rel(1, "lock", 3350, 3410, ok).
		event(histories.FKeySet, 90000, []string{"c1"}, params)
}

// Promise 7: a grant the lock calls lost 1 ms after it, 201 ms after the
// server took its previous attempt, while the server held its fresh key
// and the client asked it nothing, with no fault on c1, broke it
// (node-redlock#296's grant born expired); a fault on c2 alone changes
// nothing.
func TestContractFreshGrantCalledLost(t *testing.T) {
	want := `Promise 7 (a live grant is not called lost): on key "lock", process 1 (c1) was granted the lock at 3.30 s (invoked 1.00 s); the server had taken its previous attempt at 3.10 s and set its key at 3.29 s with a TTL of 2s, and still held it, but at 3.30 s, 201ms after that attempt, the lock told its client the grant was lost: the server took no request about the grant from its client until its release (invoked 3.35 s), and no fault touched the client, its links or the server.`
	for name, h := range map[string]*hist{
		"no fault":          freshGrant(3301, nil),
		"a fault on c2":     freshGrant(3301, nil).fault("pause", []string{"c2"}, 3000, 3500),
		"no request at all": freshGrant(3301, map[string]string{"next_ns": "", "changed_ns": ""}),
	} {
		r := Contract(h.ops())
		expect(t, r, Invalid)
		if !slices.ContainsFunc(r.Violations, func(v Violation) bool { return v.Kind == "promise 7" && strings.HasPrefix(v.Story, want[:200]) }) {
			t.Errorf("%s: want promise 7 broken:\n%s", name, r.Explanation)
		}
		if name == "no fault" && !strings.Contains(r.Explanation, want) {
			t.Errorf("explanation lacks %q:\n%s", want, r.Explanation)
		}
	}
}

// What excuses a lost told at once, or leaves it unknown: never promise 7
// broken. A correct lock counts its claim's time from a moment after its
// previous attempt's reply, so it calls the grant lost only half a TTL
// after that attempt or later (a stall of its process before its winning
// request included); a fault near the client, a request it sent first (a
// renewal whose answer may have said lost), or a key that may have been
// changed by then excuse it. Without the evidence (a first attempt that
// won, no key-set event), a lost told at once leaves it unjudged.
func TestContractFreshGrantExcused(t *testing.T) {
	for name, tc := range map[string]struct {
		h       *hist
		unknown string
	}{
		"half a TTL after the attempt": {h: freshGrant(4100, nil)},
		"a fault on c1":                {h: freshGrant(3301, nil).fault("slow", []string{"c1"}, 3000, 3200)},
		"a crash of the server":        {h: freshGrant(3301, nil).fault("crash", []string{"r0"}, 3250, 3260)},
		"a renewal sent first":         {h: freshGrant(3301, map[string]string{"next_ns": "3295"})},
		"the key changed first":        {h: freshGrant(3301, map[string]string{"changed_ns": "3300"})},
		"the key's TTL ran out first":  {h: freshGrant(3301, map[string]string{"ttl_ms": "10"})},
		"a first attempt that won":     {h: freshGrant(3301, map[string]string{"asked_ns": ""}), unknown: "Promise 7 (a live grant is not called lost) could not be judged: the lock told process 1 (c1) its grant of 3.30 s was lost at 3.30 s, but the observer tells no attempt before the one that set its key"},
		"no key-set event of it": {h: freshGrant(3301, nil).event(histories.FKeySet, 90001, []string{"c2"},
			map[string]string{"key": "lock", "process": "2", "server": "r0", "ttl_ms": "2000", "set_ns": "95000000000"}), unknown: "but the observer tells no key-set event"},
	} {
		h := tc.h
		if name == "no key-set event of it" {
			h.recs = slices.DeleteFunc(h.recs, func(o histories.Op) bool { return o.F == histories.FKeySet && o.Value.Targets[0] == "c1" })
		}
		r := Contract(h.ops())
		if slices.ContainsFunc(r.Violations, func(v Violation) bool { return v.Kind == "promise 7" }) {
			t.Errorf("%s: promise 7 broken:\n%s", name, r.Explanation)
		}
		unjudged := slices.Contains(r.Unjudged, promiseFresh)
		if unjudged != (tc.unknown != "") || !strings.Contains(r.Explanation, tc.unknown) {
			t.Errorf("%s: promise 7 unjudged %v, want %v (%q):\n%s", name, unjudged, tc.unknown != "", tc.unknown, r.Explanation)
		}
	}
}

// A grant on a key of an earlier session of the grantee's (CURATOR-696:
// Curator made a new session after the ensemble's outage, and its latch
// took the leadership on its old session's node, which the servers then
// expired) broke promise 8, by the session its lock told and the lease the
// servers' deletion names; the same grant on its own session's key broke
// nothing, a grant that tells no session is not judged, and one whose
// key's deletion the history lacks leaves the promise unjudged.
func TestContractGrantOfAnotherSession(t *testing.T) {
	grant := func(h *hist, p int, inv, ret, token int64, told string) *hist {
		v := histories.GrantValue(token, token, "/l/lock/latch-"+strconv.FormatInt(token, 10))
		v.Session = told
		return h.op(p, "lock", histories.Acquire, inv, ret, ok, nil, v)
	}
	h := func(told string) *hist {
		h := (&hist{}).recorded(100, 1, 2).fault("crash-member", []string{"m0", "m1", "m2"}, 500, 2500)
		grant(h, 1, 1000, 3000, 10, told).deleted(4000, "c1", 10, 15, "expiry", "lease", "a0", "lease_alive", "false")
		return grant(h, 2, 2000, 4100, 16, "b0").
			rel(1, "lock", 6000, 6010, ok).
			rel(2, "lock", 7000, 7010, ok).deleted(7005, "c2", 16, 17, "release", "lease", "b0")
	}
	r := Contract(h("a1").ops())
	expect(t, r, Invalid, `Promise 8 (a grant holds a claim of its grantee's session): on key "lock", process 1 (c1) was granted at 3.00 s on the key of token 10, and its lock said it was on session a1; but the key was session a0's`)
	if len(r.Violations) != 1 || r.Violations[0].Kind != "promise 8" {
		t.Errorf("violations %+v, want one of promise 8", r.Violations)
	}
	for _, told := range []string{"a0", ""} {
		if r := Contract(h(told).ops()); r.Verdict != Valid {
			t.Errorf("a grant on session %q's own key: %s %s", told, r.Verdict, r.Explanation)
		}
	}
	kept := grant((&hist{}).recorded(100, 1), 1, 1000, 3000, 10, "a1").rel(1, "lock", 6000, 6010, ok)
	expect(t, Contract(kept.ops()), Unknown, "Promise 8 (a grant holds a claim of its grantee's session) could not be judged: the history does not say which deletion was the key of token 10")
}
