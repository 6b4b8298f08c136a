// The results of the checks, as results.json holds them.

package checker

import (
	"time"

	"github.com/locktest/locktest/histories"
)

// Verdict is the outcome of a check.
type Verdict string

// Verdicts.
const (
	Valid   Verdict = "valid"
	Invalid Verdict = "invalid"
	// Unknown means the check could not decide: it ran out of time, or the
	// history was malformed.
	Unknown Verdict = "unknown"
)

// Result is the outcome of one check over a history.
type Result struct {
	Name    string  `json:"name"` // "mutex" | "resource" | "invariant" | "liveness" | "consistency" | "contract"
	Verdict Verdict `json:"verdict"`
	// Ops counts the operations (invocations with their completions) the
	// check covers, including those that cannot constrain it.
	Ops  int `json:"ops"`
	Keys int `json:"keys"`
	// Unknown counts covered operations whose outcome is unknown: info, no
	// completion, and (mutex) failed releases.
	Unknown  int           `json:"unknown"`
	Duration time.Duration `json:"duration_ns"`
	// Segments is the number of independent pieces porcupine checked (see
	// segment.go), and Checked how many of them it finished: fewer when the
	// check ran out of time.
	Segments int `json:"segments,omitempty"`
	Checked  int `json:"segments_checked,omitempty"`
	// Explanation says, for an invalid or unknown verdict, what went wrong,
	// in a few plain sentences, one per line.
	Explanation string `json:"explanation,omitempty"`
	// Violations are the violations found, each with its story.
	Violations []Violation `json:"violations,omitempty"`
	// LeaseRaces and LockBugs are, for the contract check, how many
	// overlaps of two holders the lease race explains (the earlier claim
	// was lost first) and how many were bugs in the lock; Unjudged names
	// the promises it could not judge.
	LeaseRaces int `json:"lease_races,omitempty"`
	LockBugs   int `json:"lock_bugs,omitempty"`
	// Undecided counts, for the contract check, the overlaps the history
	// cannot tell to be either; Overlaps gives each judged overlap's class.
	Undecided int            `json:"undecided_overlaps,omitempty"`
	Overlaps  []OverlapClass `json:"overlap_classes,omitempty"`
	Unjudged  []string       `json:"unjudged,omitempty"`
	// Visual is porcupine's visualization of the check (mutex and
	// resource), for the caller to write; Visualization is where the
	// caller wrote it, if it did.
	Visual        *Visualization `json:"-"`
	Visualization string         `json:"visualization,omitempty"`
}

// Violation is one thing that went wrong, for results.json: who, which
// tokens, when, the faults active then, and the story in plain words.
type Violation struct {
	Check string `json:"check"`
	// Kind is "overlap" (two processes believed they held a lock at once),
	// "token-order" (a grant's token not above an earlier one),
	// "stale-write" (the resource accepted a lower token after a higher
	// one), "not-linearizable" (porcupine's verdict, with its window),
	// "stuck", "ghost", "orphan" or "unwoken" (liveness) or "diverged" (consistency).
	Kind      string   `json:"kind"`
	Key       string   `json:"key,omitempty"`
	Processes []int    `json:"processes,omitempty"`
	Tokens    []int64  `json:"tokens,omitempty"`
	Members   []string `json:"members,omitempty"`
	// From and To bound the violation in history time (nanoseconds).
	From   int64   `json:"from_ns"`
	To     int64   `json:"to_ns"`
	Faults []Fault `json:"faults,omitempty"`
	// Window is, for porcupine's verdict, the part of the history it needed.
	Window *Window `json:"window,omitempty"`
	Story  string  `json:"story"`
}

// Window is a stretch of one key's history that porcupine checked on its own
// (a segment) and found not linearizable.
type Window struct {
	Key        string `json:"key"`
	From       int64  `json:"from_ns"`
	To         int64  `json:"to_ns"`
	FirstIndex int    `json:"first_index"`
	LastIndex  int    `json:"last_index"`
	Ops        int    `json:"ops"`
}

// Fault is a nemesis fault's window, from its "start" to its "stop" (or the
// final "heal", or the end of the history), or a point event.
type Fault struct {
	Fault   string            `json:"fault"`
	Targets []string          `json:"targets,omitempty"`
	Params  map[string]string `json:"params,omitempty"`
	// Outcome are the params its stop adds or changes: what the fault
	// found as it ended (a lost reply's "reply" and "client_saw").
	Outcome map[string]string `json:"outcome,omitempty"`
	Start   int64             `json:"start_ns"`
	End     int64             `json:"end_ns"`
	// Unended says no stop or heal ended it: it lasted to the history's end.
	Unended bool `json:"unended,omitempty"`
	Index   int  `json:"index"`
}

// Belief is an interval in which a process believed it held a key's lock:
// from its acquire's ok to its release's invocation, or to when its session
// noticed the lease was gone, or, without either, to when it was last seen
// acting.
type Belief struct {
	Key          string `json:"key"`
	Process      int    `json:"process"`
	Token        int64  `json:"token"`
	HasToken     bool   `json:"-"`
	From         int64  `json:"from_ns"`
	To           int64  `json:"to_ns"`
	Ended        string `json:"ended"` // "release" or "last-seen"
	AcquireIndex int    `json:"acquire_index"`
	// grant is the grant that started the belief: what identifies it
	// (history indices need not be unique in records built by code).
	grant *operation
}

// Deletion is the server's truth that a lock key was deleted: a
// "key-deleted" nemesis event.
type Deletion struct {
	Key      string   `json:"key"`
	Token    int64    `json:"token"`              // the key's create revision
	Revision int64    `json:"revision,omitempty"` // of the delete; 0 if not recorded
	Lease    string   `json:"lease,omitempty"`
	By       string   `json:"by,omitempty"` // "release" | "expiry" | ...
	Targets  []string `json:"targets,omitempty"`
	Time     int64    `json:"time_ns"`
	Index    int      `json:"index"`
	// leaseAlive says whether the lease existed after the deletion
	// ("true", "false"; "": the observer could not ask); releasedBy and
	// releasedToken are, for an other-release, whose release of which
	// token deleted it; owner is the process the observer says owned the
	// key (-1: not said). node is the deleted child's name (ZooKeeper's
	// observer says it; "": not said); headOwn, for the owner's clean-up
	// of a node never granted, the node that headed the lock's queue then,
	// another of the same session, older and never granted, created at
	// headOwnRev ("": none such, or not said); headSince, of a node that
	// headed its lock's queue when deleted, the revision of the deletion
	// after which it did at the latest (0: not said).
	leaseAlive, releasedBy, releasedToken string
	owner                                 histories.Process
	node, headOwn                         string
	headOwnRev, headSince                 int64
}

// Overlap is a pair of processes that believed they held the same lock at
// once.
type Overlap struct {
	Key    string `json:"key"`
	First  Belief `json:"first"`
	Second Belief `json:"second"`
	From   int64  `json:"from_ns"`
	To     int64  `json:"to_ns"`
}

// OverlapAnalysis is the overlap analysis beside porcupine.
type OverlapAnalysis struct {
	Beliefs   []Belief   `json:"beliefs"`
	Deletions []Deletion `json:"deletions"`
	Overlaps  []Overlap  `json:"overlaps"`
	// Truncated says more overlapping pairs exist than Overlaps holds.
	Truncated bool `json:"truncated,omitempty"`
}
