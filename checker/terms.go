package checker

import "fmt"

// terms are how the stories name a lock's claim on the server: etcd holds
// it by a lease and orders it by revisions; Redis by a key with a TTL, and
// has no revisions.
type terms struct {
	// expired is why the server deleted a key whose claim ran out, after
	// "the server deleted ...'s lock key".
	expired string
	// expiredShort is the same in the contract's stories.
	expiredShort string
	// noticed says that a client found its claim gone: who, when.
	noticed string
	// alive says that a key's claim still stood: whose.
	alive string
	// claim is what runs out: "the lease", "the key (TTL)".
	claim string
}

var (
	etcdTerms = terms{
		expired:      ": its lease expired on the server",
		expiredShort: ": its lease expired",
		noticed:      "%s's session noticed at %s that its lease was gone",
		alive:        "while %s's lease was alive",
		claim:        "the lease",
	}
	redisTerms = terms{
		expired:      ": its key expired on the server (TTL)",
		expiredShort: ": its key expired (TTL)",
		noticed:      "%s's watchdog noticed at %s that its key was gone",
		alive:        "before %s's key had expired (TTL)",
		claim:        "the key",
	}
)

// terms are the words of the history's backend; etcd's for a history from
// before the backend was recorded.
func (sd *storyData) terms() terms {
	if sd.backend == "redis" {
		return redisTerms
	}
	return etcdTerms
}

// Backend is the system under test the history was recorded on, from its
// setup event: "etcd" (also for a history from before it was recorded) or
// "redis".
func (h *History) Backend() string {
	if b := h.story().backend; b != "" {
		return b
	}
	return "etcd"
}

// Recipe is the lock recipe the history's setup event names ("" if none).
func (h *History) Recipe() string { return h.story().recipe }

// atRevision says when, with the revision where the server has revisions.
func (h *History) atRevision(rev, t int64) string {
	if rev > 0 {
		return fmt.Sprintf("revision %d (%s)", rev, h.at(t))
	}
	return h.at(t)
}
