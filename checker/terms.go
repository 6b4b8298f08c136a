package checker

import "fmt"

// Terms are a backend's words for its lock's claim on the server, as the
// stories, the summaries and the report say them: one service holds a claim
// by a lease and orders every change by a revision, another by a key with
// a TTL and has no revisions. The caller gives them by the history's
// backend (Builder.Terms); the checker names no backend.
type Terms struct {
	// Expired is why the server deleted a key whose claim ran out, after
	// "the server deleted ...'s lock key": ": its lease expired on the
	// server".
	Expired string
	// ExpiredShort is the same in the contract's stories.
	ExpiredShort string
	// Noticed says that a client found its claim gone: a format of who
	// and when.
	Noticed string
	// Alive says that a key's claim still stood: a format of whose.
	Alive string
	// Claim is what runs out: "the lease", "the key".
	Claim string
	// Unordered is why the history cannot order a grant's decision
	// against the server's deletions, for a server that orders its changes
	// by no revision the history records: the contract's promises 2 and 3
	// are then not judged. "" when it can.
	Unordered string
	// Unkeyed is why promise 2 cannot be judged for a lock that does not
	// tell the key its grant holds.
	Unkeyed string
	// ReleaseByCall says that a key-deleted "release" was made by the
	// owner's release call, after its invocation (etcd's observer ties it
	// to the release's intent), so real-time order bounds it. ZooKeeper's
	// says only that the owner's session deleted its granted node, which
	// a lock could do of its own accord.
	ReleaseByCall bool
	// KeyTTL says that a grant's key carries a TTL of its own, set by the
	// acquire that took it (Redis's SET PX): it cannot expire sooner than
	// a TTL after that acquire was invoked, so an expiry sooner, which the
	// observer put down to it, was of another key (one an acquire whose
	// reply was lost set). A session's or a lease's claim may end at any
	// time.
	KeyTTL bool
	// Key is what a grant holds on the server, in a word ("znode"), and
	// Revision what orders the server's changes ("zxid"); "" is "key" and
	// "revision".
	Key, Revision string

	// Words of a run's summary, for the callers' "in words" lines.
	//
	// Unsafe says why a lock alone is not mutual exclusion, after "the
	// lock's own mutual exclusion broke".
	Unsafe string
	// Race names the overlap of holders that every lock of its kind has,
	// fencing its cure: "the lease race (expected for any lease lock;
	// fencing is the cure)"; RaceShort in a word ("lease" races).
	Race, RaceShort string

	// The report's legend: a lock key the server deleted when its claim
	// ran out, and a client that found its claim gone.
	LegendExpired, LegendLost string
}

// LeaseTerms are the words of a lock whose claim is a key under a lease,
// judged by revisions: what a history's stories say when the caller gives
// no Terms.
var LeaseTerms = Terms{
	Expired:       ": its lease expired on the server",
	ExpiredShort:  ": its lease expired",
	Noticed:       "%s's session noticed at %s that its lease was gone",
	Alive:         "while %s's lease was alive",
	Claim:         "the lease",
	Unkeyed:       "the lock does not say which key a grant holds (lock.Keyed)",
	ReleaseByCall: true,
	Unsafe:        "a lease lock alone is not mutual exclusion",
	Race:          "the lease race (expected for any lease lock; fencing is the cure)",
	RaceShort:     "lease",
	LegendExpired: "key expired or revoked on the server",
	LegendLost:    "client noticed its lease was lost",
}

// key is the word for a grant's hold on the server.
func (t Terms) key() string {
	if t.Key == "" {
		return "key"
	}
	return t.Key
}

// revision is the word for the server's order of changes.
func (t Terms) revision() string {
	if t.Revision == "" {
		return "revision"
	}
	return t.Revision
}

// terms are the words of the history's backend.
func (h *History) terms() Terms {
	if h.termsOf == nil {
		return LeaseTerms
	}
	return h.termsOf(h.story().backend)
}

// Backend is the system under test the history was recorded on, from its
// setup event; "" in a history from before it was recorded.
func (h *History) Backend() string { return h.story().backend }

// Recipe is the lock recipe the setup event names ("" if none).
func (h *History) Recipe() string { return h.story().recipe }

// atRevision says when, with the revision where the server has revisions.
func (h *History) atRevision(rev, t int64) string {
	if rev > 0 {
		return fmt.Sprintf("%s %d (%s)", h.terms().revision(), rev, h.at(t))
	}
	return h.at(t)
}
