package checker

import (
	"slices"
	"strings"
	"testing"

	"github.com/locktest/locktest/histories"
)

// What a hand-written history can say that a check must not take for more
// than it is: each test is a class of history on which the judge once said
// something it could not know.

// leaseRace: c1 holds token 10 (its key /l/lock/a) and is paused past its
// lease; its key is deleted (as deleted says); c2 is granted token 12 on a
// state at revision 13 while c1 still believes: the plain lease race, if
// c1's key was gone by revision 13.
func leaseRace(deleted func(h *hist) *hist) *hist {
	h := (&hist{}).recorded(100, 1, 2).
		grant(1, 1000, 1100, 10, 10, "/l/lock/a").
		fault("pause-client", []string{"c1"}, 1200, 4000)
	return deleted(h).
		grant(2, 1050, 2100, 12, 13, "/l/lock/b").
		rel(2, "lock", 3000, 3010, ok).
		deleted(3005, "c2", 12, 15, "release").
		rel(1, "lock", 4100, 4110, ok)
}

// keyDeleted adds a key-deleted event with exactly the params given, and
// the record's own key.
func (h *hist) keyDeleted(at int64, owner string, recordKey string, params map[string]string) *hist {
	h.recs = append(h.recs, histories.Op{Type: histories.Info, F: histories.FKeyDeleted, Process: histories.Nemesis, Time: at * ms, Key: recordKey,
		Value: &histories.Value{Targets: []string{owner}, Params: params}})
	return h
}

// Class 1: a deletion the check cannot match to a grant is not "never
// deleted".
func TestContractUnmatchedDeletion(t *testing.T) {
	for name, tc := range map[string]struct {
		deleted func(h *hist) *hist
		want    Verdict
	}{
		"no revision": {func(h *hist) *hist {
			return h.keyDeleted(1900, "c1", "lock", map[string]string{"key": "lock", "create_revision": "10", "by": "expiry", "lease_alive": "false"})
		}, Unknown},
		"create revision 0": {func(h *hist) *hist {
			return h.keyDeleted(1900, "c1", "lock", map[string]string{"key": "lock", "create_revision": "0", "revision": "11", "by": "expiry", "lease_alive": "false"})
		}, Unknown},
		"key at the top level only": {func(h *hist) *hist {
			return h.keyDeleted(1900, "c1", "lock", map[string]string{"create_revision": "10", "revision": "11", "by": "expiry", "lease_alive": "false"})
		}, Valid},
		"no key at all": {func(h *hist) *hist {
			return h.keyDeleted(1900, "c1", "", map[string]string{"create_revision": "10", "revision": "11", "by": "expiry", "lease_alive": "false"})
		}, Valid},
	} {
		t.Run(name, func(t *testing.T) {
			r := Contract(leaseRace(tc.deleted).ops())
			if r.Verdict != tc.want || r.LockBugs != 0 || strings.Contains(r.Explanation, "Promise 3 (overlap only after loss): on key") {
				t.Fatalf("%s, %d lock bugs, want %s and none:\n%s", r.Verdict, r.LockBugs, tc.want, r.Explanation)
			}
			if tc.want == Unknown && !strings.Contains(r.Explanation, "cannot tell whether it deleted this claim") {
				t.Errorf("the explanation does not say which deletion it could not match:\n%s", r.Explanation)
			}
		})
	}
	// The mirror: the grantee's own key, deleted before its grant was
	// decided but recorded without its create revision, is not "held".
	h := (&hist{}).recorded(100, 1, 2).
		grant(1, 1000, 1100, 10, 10, "/l/lock/a").
		keyDeleted(1900, "c2", "lock", map[string]string{"key": "lock", "create_revision": "0", "revision": "13", "by": "expiry", "lease_alive": "false", "process": "2"}).
		rel(1, "lock", 2000, 2010, ok).
		deleted(2005, "c1", 10, 14, "release").
		grant(2, 1050, 2100, 12, 14, "/l/lock/b").
		rel(2, "lock", 3000, 3010, ok)
	expect(t, Contract(h.ops()), Unknown, "Promise 2 (no grant of a lost lock) could not be judged", "revision 13")
}

// Class 2: a token that is not its key's create revision (a Put that
// overwrote the key, as check-then-set's does) still finds its claim.
func TestContractOverwrittenKey(t *testing.T) {
	// c1 creates the key at revision 10; c2's Put overwrites it at 11
	// (token 11: check-then-set's bug, an overlap while c1's key stood);
	// the key is deleted at 12 as c2's lease expires; c3 is granted on a
	// state at revision 13 while c2, paused, still believes: the lease
	// race.
	const key = "/l/lock"
	h := (&hist{}).recorded(100, 1, 2, 3).
		grant(1, 1000, 1100, 10, 10, key).
		grant(2, 1050, 1200, 11, 11, key).
		rel(1, "lock", 1300, 1310, ok).
		fault("pause-client", []string{"c2"}, 1400, 5000).
		deleted(3000, "c2", 10, 12, "expiry", "lease_alive", "false", "process", "2").
		grant(3, 2000, 3100, 13, 13, key).
		rel(3, "lock", 3200, 3210, ok).
		deleted(3205, "c3", 13, 14, "release").
		rel(2, "lock", 5100, 5110, ok)
	r := Contract(h.ops())
	expect(t, r, Invalid, "process 1 (c1) (token 10, granted 1.10 s) and process 2 (c2) (token 11, granted 1.20 s on a state at revision 11) both held the lock")
	if r.LockBugs != 1 || r.LeaseRaces != 1 || strings.Contains(r.Explanation, "process 3 (c3) (token 13") {
		t.Errorf("%d bugs, %d races, want c1 and c2 the bug, c2 and c3 the race:\n%s", r.LockBugs, r.LeaseRaces, r.Explanation)
	}
}

// Class 5: a TTL too large for a duration does not wrap around.
func TestContractHugeTTL(t *testing.T) {
	expiry := func(fault bool) *hist {
		h := (&hist{}).event("setup", 0, nil, map[string]string{"ttl": "9223372036854775807", histories.SetupStalls: histories.StallsWatched}).clientOf(1, "c1").
			event("observed", 100000, nil, map[string]string{"revision": "100"}).
			grant(1, 1000, 1100, 10, 10, "/l/lock/a").
			deleted(8000, "c1", 10, 11, "expiry", "lease_alive", "false").
			rel(1, "lock", 9000, 9010, ok)
		if fault {
			h.fault("pause-client", []string{"c1"}, 200, 300)
		}
		return h
	}
	// A fault within the window (here, any time before) excuses it.
	expect(t, Contract(expiry(true).ops()), Valid)
	r := Contract(expiry(false).ops())
	expect(t, r, Invalid, "no fault was active since the history began")
	if strings.Contains(r.Explanation, "-") {
		t.Errorf("a negative duration: %s", r.Explanation)
	}
}

// Class 6: one key deleted twice (at revisions 11 and 14) leaves the
// state at revision 12 unknown, whichever line comes first.
func TestContractKeyDeletedTwice(t *testing.T) {
	for _, order := range [][2]int64{{11, 14}, {14, 11}} {
		h := leaseRace(func(h *hist) *hist {
			return h.deleted(1900, "c1", 10, order[0], "expiry", "lease_alive", "false").
				deleted(1950, "c1", 10, order[1], "expiry", "lease_alive", "false")
		})
		r := Contract(h.ops())
		expect(t, r, Unknown, "deletions of keys created at revision 10 are recorded at revisions 11 and 14")
		if r.LockBugs != 0 || r.LeaseRaces != 0 {
			t.Errorf("order %v: %d bugs, %d races", order, r.LockBugs, r.LeaseRaces)
		}
	}
}

// Class 8: an other-release is definite without an observed event, and a
// nemesis event of an f the format does not have is no fault.
func TestContractDefiniteWithoutObserved(t *testing.T) {
	h := overlapping(11).recorded(100, 3).
		grant(3, 3000, 3500, 16, 16, "/l/lock/c").
		deleted(4150, "c3", 16, 17, "other-release", "released_by", "c1", "released_token", "10", "lease_alive", "true").
		rel(3, "lock", 5000, 5010, ok)
	ops := slices.DeleteFunc(h.ops(), func(op histories.Op) bool { return op.F == histories.FObserved })
	expect(t, Contract(ops), Invalid, "Promise 4 (release only your own)")
	// Said of a deletion whose lease was gone, it is not definite.
	h = overlapping(11).recorded(100, 3).
		grant(3, 3000, 3500, 16, 16, "/l/lock/c").
		deleted(4150, "c3", 16, 17, "other-release", "released_by", "c1", "released_token", "10", "lease_alive", "false").
		rel(3, "lock", 5000, 5010, ok)
	expect(t, Contract(h.ops()), Unknown, "its lease was gone")

	noRenew := func(f string) []histories.Op {
		return (&hist{}).recorded(100, 1).
			event(f, 5000, []string{"c1"}, map[string]string{"note": "x"}).
			grant(1, 1000, 1100, 10, 10, "/l/lock/a").
			deleted(8000, "c1", 10, 11, "expiry", "lease_alive", "false").
			rel(1, "lock", 9000, 9010, ok).ops()
	}
	expect(t, Contract(noRenew("banana")), Invalid, "Promise 5")
	// A start is a fault, whatever its kind.
	expect(t, Contract(noRenew(histories.FStart)), Valid)
}

// The rules of the format apply to records built by code too: a duplicate
// index, an impossible grant, a process number announced for two clients
// make the history malformed, and every check unknown.
func TestBuildAppliesTheRules(t *testing.T) {
	dup := twoHolders().ops()
	dup[3].Index = dup[2].Index
	grantBelow := twoHolders().grant(3, 4000, 4100, 20, 19, "/l/lock/c").ops()
	reannounced := twoHolders().clientOf(2, "c7").ops()
	for name, ops := range map[string][]histories.Op{"duplicate index": dup, "grant below its token": grantBelow, "process announced again": reannounced} {
		for _, r := range Judge(Input{History: Build(ops)}) {
			if r.Name != histories.CheckConsistency && (r.Verdict != Unknown || !strings.Contains(r.Explanation, "malformed")) {
				t.Errorf("%s: %s %s: %s", name, r.Name, r.Verdict, r.Explanation)
			}
		}
	}
}

// The invariant of a workload the setup does not say enough of is not
// judged: a stock without its items (every sale would be "oversold"), a
// workload this checker does not know.
func TestInvariantOfAWorkloadNotKnown(t *testing.T) {
	sales := func(params map[string]string) *hist {
		return (&hist{}).setup(params).
			read(0, "k", 1, 2, ok, 0).write(0, "k", 3, 4, ok, 5, 1).
			read(1, "k", 5, 6, ok, 1)
	}
	expect(t, Invariant(sales(map[string]string{"workload": "stock", "items": "1"}).ops()), Valid)
	expect(t, Invariant(sales(map[string]string{"workload": "stock"}).ops()), Unknown, "not its items")
	expect(t, Invariant(sales(map[string]string{"workload": "bank"}).ops()), Unknown, `workload "bank"`)
}

// A process acts in order: an invocation before its previous operation
// completed is malformed, not a linearization puzzle.
func TestProcessActsInOrder(t *testing.T) {
	ops := []histories.Op{
		{Type: histories.Invoke, F: histories.Acquire, Process: 1, Time: 10},
		{Type: histories.OK, F: histories.Acquire, Process: 1, Time: 100, Value: histories.TokenValue(1)},
		{Type: histories.Invoke, F: histories.Release, Process: 1, Time: 50},
		{Type: histories.OK, F: histories.Release, Process: 1, Time: 120},
	}
	for i := range ops {
		ops[i].Index = i
	}
	expect(t, Mutex(ops, Options{}), Unknown, "before its previous operation completed")
}
