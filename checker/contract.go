// The contract check: the eight promises a lease-based lock can keep.

package checker

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/words"
)

// The contract check judges what a lease-based lock can promise, and is
// invalid exactly when a promise definitely broke; an overlap of holders
// that the lease race explains is not a broken promise. The promises:
//
//  1. Tokens grow: a grant's token is greater than every token returned by
//     a grant of the same lock before this grant was invoked.
//  2. No grant of a lost lock: the state the grant was decided on (its
//     decision revision: the revision of the response the lock decided
//     on, or the newest revision it had read when Acquire returned) still holds the grantee's claim (its key).
//  3. Overlap only after loss: when two holders' beliefs overlap, the
//     claim of the one first in line (the lower token) was gone in the
//     state the other's grant was decided on.
//  4. Release only your own: no release deleted the key of another grant:
//     another client's, or a later grant of the releasing client's own
//     session (a retried release whose reply was lost: etcd#22082), by the
//     observer's definite "other-release".
//  5. A live holder keeps its claim: a holder's lease does not expire on
//     the server while no fault was active during its last TTL, but
//     faults on other clients (a client's pause, links, clock or lease
//     reach its own session alone). Stalls
//     of locktest's own process then (the host did not run it: the
//     history's stall events) of a quarter of the TTL or more, or a
//     history that does not say it watched for them, leave it unjudged:
//     a client that is not run cannot renew, and cannot be told from one
//     paused by a fault.
//  6. A release that returned ok took effect: right after it returned,
//     the server no longer held the key with the value the releasing
//     grant set (the observer's key-kept event says it still did: a
//     release that answered success and left the lock taken until its
//     TTL, redis-py#3847's retried release). Judged where the observer
//     reads the key after each release (Redis on one server); a history
//     without such reads has nothing to break it.
//  7. A live grant is not called lost: the lock does not tell its client
//     that a grant is lost while, by the server's own clock, the key the
//     grant set is still there, less than half its TTL has passed since
//     the server took the client's previous attempt (the same request,
//     whose reply came before the client began the attempt that won: a
//     lock that counts its claim's time from any moment after it has
//     more than half the TTL left, a stalled client included), the lock
//     asked the server nothing about the grant (its next request with
//     the grant's value is the release, or none), and no fault could
//     touch the client, its links or the server. A lock that dates its
//     claim from before its earlier attempts breaks it (node-redlock#296:
//     a lock won after retries longer than its TTL is called lost at
//     once, and never renewed). Judged on the observer's key-set events
//     (Redis on one server, from its MONITOR); a history without them has
//     nothing to break it.
//  8. A grant holds a claim of its grantee's session: where the lock
//     tells the session it was on when it answered the grant (a lock in
//     a process of its own, lock-client protocol version 2), the grant's
//     key belongs to that session (the lease the servers' deletion of it
//     names). A lock that took its grant on a key an earlier session of
//     its own left behind, which the servers still held and expire later
//     (CURATOR-696, CURATOR-604), broke it: nothing keeps that claim. A
//     grant that tells no session has nothing to break it.
//
// Order is judged by revisions (a backend whose server has none says so in
// its Terms, and promises 2 and 3 are then not judged): a claim is the key
// created at the token's revision (the token of every built-in recipe of a
// server with revisions is its key's create revision), lost at the
// revision of its key-deleted event, or after the history's "observed"
// revision if it has no such event; where the history cannot tell which
// deletion was a claim's (see claims), the promises that needed it are not
// judged.
const (
	promiseTokens  = "1 (tokens grow)"
	promiseLost    = "2 (no grant of a lost lock)"
	promiseOverlap = "3 (overlap only after loss)"
	promiseRelease = "4 (release only your own)"
	promiseLive    = "5 (a live holder keeps its claim)"
	promiseTaken   = "6 (a release that returned ok took effect)"
	promiseFresh   = "7 (a live grant is not called lost)"
	promiseSession = "8 (a grant holds a claim of its grantee's session)"
)

// promises are the promises in order, as the explanation lists them.
var promises = []string{promiseTokens, promiseLost, promiseOverlap, promiseRelease, promiseLive, promiseTaken, promiseFresh, promiseSession}

// expirySlack widens the window in which promise 5 looks for faults before
// an expiry, beyond the TTL: the server may expire a lease later than the
// TTL after its last renewal (a new leader extends every lease by a full
// TTL plus an election timeout, and the lessor checks for expired leases
// every 500 ms), a renewal sent before a fault ended may have been the last
// answered, and the observer records a deletion after a TimeToLive call of
// up to 1 s. A fault that ended within TTL + expirySlack + TTL of the
// recorded deletion therefore excuses it: a false "broken" is worse than a
// missed one.
const expirySlack = 2 * time.Second

// stallShare: stalls of locktest's own process that add up to TTL/stallShare
// in promise 5's window leave an expiry unjudged. Shorter ones do not: a
// lease lock renews well within its TTL (every TTL/3: etcd's keepalive,
// Redisson's watchdog, pg-lease), and one that lapses when its process is
// not run for less than a quarter of it fails a healthy holder.
const stallShare = 4

// Contract checks the lock's contract; see History.Contract.
func Contract(ops []histories.Op) Result { return Build(ops).Contract() }

// contractJudge collects one run of the contract check.
type contractJudge struct {
	h          *History
	sd         *storyData
	claim      []claim // by the grant's belief
	violations map[string][]Violation
	unjudged   map[string]string // promise → why not (first reason)
	races      int
	bugs       int
	undecided  int
	classes    []OverlapClass
	classOf    map[[2]*operation]string // by the overlap's two grants
}

// noRevisions says why promises judged by revisions cannot be judged on a
// server that has none (the backend's Terms say), or "".
func (j *contractJudge) noRevisions() string { return j.h.terms().Unordered }

func (j *contractJudge) cannot(promise, why string) {
	if _, ok := j.unjudged[promise]; !ok {
		j.unjudged[promise] = why
	}
}

func (j *contractJudge) broke(promise string, v Violation) {
	v.Check, v.Kind = histories.CheckContract, "promise "+strings.SplitN(promise, " ", 2)[0]
	v.Story = "Promise " + promise + ": " + v.Story
	if len(v.Faults) > 0 {
		// A promise broken under a fault may be the fault's doing (a crash
		// of a server that keeps its counter only in memory): say which.
		v.Story = strings.TrimSuffix(v.Story, ".") + "; faults active then: " + j.h.describeFaults(v.Faults) + "."
	}
	j.violations[promise] = append(j.violations[promise], v)
}

// claim is what the history says of a grant's claim on the server: the
// key it holds, created at (or, for a lock whose write may overwrite a key,
// before) the token's revision, and lost when that key is deleted. It was
// on the server in every state from the token's revision to before
// revision lo, and in none from revision hi on (math.MaxInt64: the history
// does not say it was deleted). Between, the history cannot tell, for the
// reason why.
type claim struct {
	lo, hi int64
	// del is a deletion of the claim's key, at revision hi, when hi is
	// finite; before is the first deletion that may have been the claim's,
	// at lo, when lo comes from one.
	del, before *Deletion
	why         string
}

// heldAt says whether the claim was on the server in the state at revision
// rev (at least the token's); ok is false if the history cannot tell. Only
// a deletion ends a claim: without one, hi is no revision (a grant that
// says it decided at the largest revision, in a history locktest did not
// write, is not thereby lost).
func (c claim) heldAt(rev int64) (held, ok bool) {
	switch {
	case rev < c.lo:
		return true, true
	case c.del != nil && rev >= c.hi:
		return false, true
	}
	return false, false
}

// claims finds what the history says of each grant's claim. A deletion is
// the claim's for certain if it deleted the key created at the token's
// revision (its create_revision is the token: the token of every built-in
// recipe), or deleted a key another grant created while it stood, where
// both grants say they hold that same key (a write that overwrote the key,
// as check-then-set's Put may). A deletion that may be the claim's without
// being so for certain (no create revision, no revision, the key of no
// grant the history can tell apart from this one's) bounds what the
// history can say: the claim was held before it, and whether after, the
// history cannot tell. Without any such deletion, the claim was held up to
// the observed revision, if the history has one: every deletion up to it
// is recorded.
func (j *contractJudge) claims(grants []*operation) []claim {
	out := make([]claim, len(j.sd.beliefs)) // by the grant's belief
	byLock := map[string][]*operation{}
	for _, g := range grants {
		if g.made > 0 {
			byLock[g.key] = append(byLock[g.key], g)
		}
	}
	for lock, gs := range byLock {
		ix := j.indexDeletions(lock, gs)
		for _, g := range gs {
			out[g.belief] = ix.claim(g)
		}
	}
	return out
}

// lockDeletions indexes the deletions of one lock's keys (and those that
// name no lock) for its grants' claims.
type lockDeletions struct {
	j *contractJudge
	// created are the deletions with a create revision, by it.
	created []*Deletion
	// instances are, per key that several grants say they hold, the
	// spans [create, delete) of that key the history's deletions show, by
	// create revision.
	instances map[string][]*Deletion
	// open are the deletions of keys no grant is known to hold apart from
	// others (no create revision, or one that no grant of the lock has, or
	// a grant that does not say its key), by revision; unknown revisions
	// first.
	open []*Deletion
}

func (j *contractJudge) indexDeletions(lock string, grants []*operation) *lockDeletions {
	ix := &lockDeletions{j: j, instances: map[string][]*Deletion{}}
	byToken := slices.Clone(grants)
	byTok := func(a, b *operation) int { return cmp.Compare(a.made, b.made) }
	if !slices.IsSortedFunc(byToken, byTok) { // tokens mostly grow with the grants
		slices.SortFunc(byToken, byTok)
	}
	// The keys several grants say they hold.
	byClaim := slices.Clone(grants)
	slices.SortFunc(byClaim, func(a, b *operation) int { return cmp.Compare(a.claim, b.claim) })
	shared := map[string]bool{}
	for i := 1; i < len(byClaim); i++ {
		if c := byClaim[i].claim; c != "" && c == byClaim[i-1].claim {
			shared[c] = true
		}
	}
	for i := range j.sd.deletions {
		d := &j.sd.deletions[i]
		if d.Key != "" && d.Key != lock {
			continue
		}
		k, _ := slices.BinarySearchFunc(byToken, d.Token, func(g *operation, t int64) int { return cmp.Compare(g.made, t) })
		known := false
		if d.Token > 0 {
			ix.created = append(ix.created, d)
			known = k < len(byToken) && byToken[k].made == d.Token
		}
		for ; known && k < len(byToken) && byToken[k].made == d.Token; k++ {
			g := byToken[k]
			if g.claim == "" {
				known = false
			} else if shared[g.claim] && d.Revision > 0 {
				ix.instances[g.claim] = append(ix.instances[g.claim], d)
			}
		}
		if !known {
			ix.open = append(ix.open, d)
		}
	}
	if byCreate := func(a, b *Deletion) int { return cmp.Compare(a.Token, b.Token) }; !slices.IsSortedFunc(ix.created, byCreate) {
		slices.SortStableFunc(ix.created, byCreate)
	}
	for _, ds := range ix.instances {
		slices.SortFunc(ds, func(a, b *Deletion) int { return cmp.Compare(a.Token, b.Token) })
	}
	slices.SortStableFunc(ix.open, func(a, b *Deletion) int { return cmp.Compare(a.Revision, b.Revision) })
	return ix
}

// createdAt returns the deletions of keys created at revision rev.
func (ix *lockDeletions) createdAt(rev int64) []*Deletion {
	lo, _ := slices.BinarySearchFunc(ix.created, rev, func(d *Deletion, t int64) int { return cmp.Compare(d.Token, t) })
	hi := lo
	for hi < len(ix.created) && ix.created[hi].Token == rev {
		hi++
	}
	return ix.created[lo:hi]
}

func (ix *lockDeletions) claim(g *operation) claim {
	c := claim{lo: math.MaxInt64, hi: math.MaxInt64}
	definite := func(d *Deletion) {
		if d.Revision == 0 { // deleted, but when is not known
			if g.made+1 < c.lo {
				c.lo, c.before = g.made+1, d
				c.why = ix.j.unmatched(d)
			}
			return
		}
		if c.del == nil || d.Revision > c.hi {
			c.hi, c.del = d.Revision, d
		}
	}
	for _, d := range ix.createdAt(g.made) {
		definite(d)
	}
	if g.claim != "" {
		// The span of the key the grant holds that stood at its token:
		// the last created before it.
		ds := ix.instances[g.claim]
		k, _ := slices.BinarySearchFunc(ds, g.made, func(d *Deletion, t int64) int { return cmp.Compare(d.Token, t) })
		if k > 0 && ds[k-1].Token < g.made && ds[k-1].Revision > g.made {
			definite(ds[k-1])
		}
	}
	if c.del != nil {
		// Several deletions of keys created at one revision (keys created
		// together) leave the claim's between the first and the last.
		first := c.hi
		for _, d := range ix.createdAt(g.made) {
			if d.Revision > 0 {
				first = min(first, d.Revision)
			}
		}
		if first < c.lo {
			c.lo = first
		}
		if c.lo < c.hi && c.why == "" {
			c.why = fmt.Sprintf("deletions of keys created at revision %d are recorded at revisions %d and %d", g.made, c.lo, c.hi)
		}
		return c
	}
	// The first open deletion that may be the claim's.
	may := func(d *Deletion) bool {
		return d.Token < g.made && (d.owner < 0 || d.owner == g.process)
	}
	for _, d := range ix.open {
		if d.Revision > 0 {
			break
		}
		if may(d) && g.made+1 < c.lo {
			c.lo, c.before, c.why = g.made+1, d, ix.j.unmatched(d)
		}
	}
	k, _ := slices.BinarySearchFunc(ix.open, g.made, func(d *Deletion, t int64) int {
		if d.Revision <= t {
			return -1
		}
		return 1
	})
	for _, d := range ix.open[k:] {
		if d.Revision >= c.lo {
			break
		}
		if may(d) {
			c.lo, c.before, c.why = d.Revision, d, ix.j.unmatched(d)
			break
		}
	}
	if c.before != nil {
		return c
	}
	if obs := ix.j.sd.observed; obs > 0 {
		c.lo = max(obs, g.made) + 1
		c.why = fmt.Sprintf("the history records no deletion of it, and the observer saw every deletion only up to revision %d", obs)
	} else {
		c.lo = g.made + 1
		c.why = "the history records no deletion of it, and no observed revision up to which it records every deletion"
	}
	return c
}

// unmatched says why a deletion may be a claim's without being so for
// certain.
func (j *contractJudge) unmatched(d *Deletion) string {
	var what []string
	if d.Revision == 0 {
		what = append(what, "no revision")
	}
	if d.Token == 0 {
		what = append(what, "no create revision")
	} else {
		what = append(what, fmt.Sprintf("the create revision %d of another key", d.Token))
	}
	if d.Key == "" {
		what = append(what, "no lock key")
	}
	return fmt.Sprintf("the deletion recorded at %s (history index %d) has %s, so the history cannot tell whether it deleted this claim", j.h.atRevision(d.Revision, d.Time), d.Index, strings.Join(what, ", "))
}

// Contract judges the eight promises a lease-based lock can keep (see the
// constants above). It is invalid if one definitely broke; unknown, naming
// the promises it could not judge and why, if the history lacks what one
// needs (decision revisions, the grants' keys, the observer's deletions, the
// TTL) or holds no grant at all; valid otherwise. Overlapping holders are
// counted as the lease race (the earlier claim was lost first: expected of
// any lease lock) or as bugs in the lock.
func (h *History) Contract() Result {
	h.contractOnce.Do(func() { h.contract = h.judgeContract() })
	return h.contract
}

// OverlapClass is the class the contract check gave overlap o (ClassLeaseRace,
// ClassLockBug, ClassOtherRelease, ClassUndecided), or "" if it judged no
// class (a grant without its token or key).
func (h *History) OverlapClass(o Overlap) string {
	h.Contract()
	return h.classOf[[2]*operation{o.First.grant, o.Second.grant}]
}

func (h *History) judgeContract() Result {
	began := time.Now()
	res := Result{Name: histories.CheckContract, Verdict: Unknown}
	if h.err != nil {
		res.Explanation = "The history is malformed: " + h.err.Error() + "."
		return res
	}
	j := &contractJudge{h: h, sd: h.story(), violations: map[string][]Violation{}, unjudged: map[string]string{}, classOf: map[[2]*operation]string{}}
	var grants []*operation
	keys := map[string]bool{}
	for _, o := range h.ops {
		if o.f == histories.Acquire && o.status == histories.OK {
			grants = append(grants, o)
			keys[o.key] = true
		}
	}
	res.Ops, res.Keys = len(grants), len(keys)
	if len(grants) == 0 {
		res.Explanation = "The history holds no grant: there is nothing to judge the lock's contract on."
		res.Duration = time.Since(began)
		return res
	}
	j.claim = j.claims(grants)
	j.tokens(grants)
	j.lost(grants)
	j.overlaps()
	j.releases()
	j.live()
	j.kept()
	j.fresh(grants)
	j.sessions(grants)
	res.LeaseRaces, res.LockBugs, res.Undecided, res.Overlaps = j.races, j.bugs, j.undecided, j.classes
	h.classOf = j.classOf

	var lines []string
	for _, p := range promises {
		vs := j.violations[p]
		for i, v := range vs {
			if i == maxStories {
				lines = append(lines, fmt.Sprintf("(%d more violations of promise %s.)", len(vs)-maxStories, p))
				break
			}
			res.Violations = append(res.Violations, v)
			lines = append(lines, v.Story)
		}
	}
	var notJudged []string
	for _, p := range promises {
		if why, ok := j.unjudged[p]; ok {
			res.Unjudged = append(res.Unjudged, p)
			notJudged = append(notJudged, fmt.Sprintf("Promise %s could not be judged: %s.", p, why))
		}
	}
	switch {
	case len(res.Violations) > 0:
		res.Verdict = Invalid
	case len(notJudged) == 0:
		res.Verdict = Valid
	}
	res.Explanation = joinLines(append(lines, notJudged...)...)
	res.Duration = time.Since(began)
	return res
}

// tokens judges promise 1: per lock, a grant's token must exceed every token
// returned before the grant was invoked.
func (j *contractJudge) tokens(grants []*operation) {
	if j.sd.noFencingToken {
		j.cannot(promiseTokens, "the recipe's token is no fencing token (locktest's count, taken after the grant): the lock promises nothing of its order")
		return
	}
	byRet := slices.Clone(grants)
	slices.SortStableFunc(byRet, func(a, b *operation) int { return cmp.Compare(a.ret, b.ret) })
	byCall := slices.Clone(grants)
	slices.SortStableFunc(byCall, func(a, b *operation) int { return cmp.Compare(a.call, b.call) })
	top := map[string]*operation{} // per key, the highest token returned so far
	i := 0
	for _, g := range byCall {
		for ; i < len(byRet) && byRet[i].ret < g.call; i++ {
			r := byRet[i]
			if !r.hasTok {
				continue
			}
			if t := top[r.key]; t == nil || r.tok > t.tok {
				top[r.key] = r
			}
		}
		if !g.hasTok {
			j.cannot(promiseTokens, "a grant carries no token")
			continue
		}
		if t := top[g.key]; t != nil && g.tok <= t.tok && len(j.violations[promiseTokens]) <= maxStories {
			h := j.h
			j.broke(promiseTokens, Violation{Key: g.key, Processes: []int{int(t.process), int(g.process)}, Tokens: []int64{t.tok, g.tok},
				From: t.ret, To: g.ret, Faults: h.faultsDuring(t.ret, g.ret),
				Story: fmt.Sprintf("on key %q, %s was granted token %d at %s (invoked %s), but %s had been granted the higher or equal token %d at %s.",
					g.key, h.who(g.process), g.tok, h.at(g.ret), h.at(g.call), h.who(t.process), t.tok, h.at(t.ret))})
		}
	}
}

// lost judges promise 2: each grant's claim must be on the server in the
// state it was decided on.
func (j *contractJudge) lost(grants []*operation) {
	h := j.h
	key, rev := h.terms().key(), h.terms().revision()
	if why := j.noRevisions(); why != "" {
		j.cannot(promiseLost, why)
		return
	}
	for _, g := range grants {
		switch {
		case g.made == 0:
			j.cannot(promiseLost, "a grant carries no token")
			continue
		case g.rev == 0 && g.revMax == 0:
			j.cannot(promiseLost, "the grants carry no decision revision (a history recorded before locktest recorded them, or a lock that does not tell one: a lock in another process whose replies give no \"revision\" whose token is its key's create revision), and no revision_max read by locktest after the reply")
			continue
		case !g.keyed():
			j.cannot(promiseLost, j.h.terms().Unkeyed)
			continue
		case g.rev == 0 && g.revMax > 0:
			// Without the lock's word, a grant is judged only kept: its
			// key still on the server at the read locktest made after the
			// reply was on it at the decision, made between the key's
			// creation and that read. A key gone by the read may have
			// gone before the decision or after it.
			if held, ok := j.claim[g.belief].heldAt(g.revMax); !ok || !held {
				j.cannot(promiseLost, fmt.Sprintf("the lock does not tell its decision %s, and the %s was gone by %s %d, which locktest read after the reply: the history cannot tell whether before the decision", rev, j.claimOf(g), rev, g.revMax))
			}
			continue
		}
		c := j.claim[g.belief]
		held, ok := c.heldAt(g.rev)
		switch {
		case !ok:
			j.cannot(promiseLost, fmt.Sprintf("the history does not say whether the %s was deleted by %s %d: %s", j.claimOf(g), rev, g.rev, c.why))
		case !held && len(j.violations[promiseLost]) <= maxStories:
			d := c.del
			waited := ""
			if g.call <= d.Time && d.Time <= g.ret {
				waited = " while it waited"
			}
			j.broke(promiseLost, Violation{Key: g.key, Processes: []int{int(g.process)}, Tokens: []int64{g.made},
				From: min(d.Time, g.ret), To: g.ret, Faults: h.faultsDuring(min(d.Time, g.call), g.ret),
				Story: fmt.Sprintf("on key %q, %s was granted token %d at %s (asked at %s) on a state at %s %d, but the server had deleted its %s (token %d) at %s %d (%s)%s%s: it was granted a lock whose %s was already gone.",
					g.key, h.who(g.process), g.made, h.at(g.ret), h.at(g.call), rev, g.rev, key, g.made, rev, d.Revision, h.at(d.Time), deletionCause(h, *d), waited, key)})
		}
	}
}

// deletionCause says why the server deleted a key, as ": ..." or "".
func deletionCause(h *History, d Deletion) string {
	switch d.By {
	case histories.DeletedByExpiry:
		if h.revokedAt(d) {
			return ": the nemesis revoked its lease"
		}
		return h.terms().ExpiredShort
	case histories.DeletedByRevoke:
		return ": its session was closed"
	case histories.DeletedByRelease:
		return ": its holder released it"
	case histories.DeletedByAcquire:
		return ": its owner deleted it after a failed wait"
	case histories.DeletedByOther:
		return releasedBy(d)
	}
	return ""
}

// releasedBy says whose release deleted a key another grant held: another
// client's, or its own client's, of an older grant (a retry).
func releasedBy(d Deletion) string {
	if r := d.releasedBy; r != "" && slices.Equal(d.Targets, []string{r}) {
		return ": its own client's release of an older grant deleted it"
	}
	return ": another client's release deleted it"
}

// overlaps judges promise 3 on every overlap of two holders' beliefs.
func (j *contractJudge) overlaps() {
	h := j.h
	key, rev := h.terms().key(), h.terms().revision()
	an := h.Overlaps()
	if an.Truncated {
		j.cannot(promiseOverlap, fmt.Sprintf("more than %d overlaps; only the first were judged", MaxOverlaps))
	}
	classed := func(ov Overlap, class string) {
		j.classes = append(j.classes, OverlapClass{Key: ov.Key, First: ov.First.AcquireIndex, Second: ov.Second.AcquireIndex, Class: class})
		j.classOf[[2]*operation{ov.First.grant, ov.Second.grant}] = class
		if class == ClassUndecided {
			j.undecided++
		}
	}
	if why := j.noRevisions(); why != "" && len(an.Overlaps) > 0 {
		j.cannot(promiseOverlap, why)
		for _, ov := range an.Overlaps {
			classed(ov, ClassUndecided)
		}
		return
	}
	for _, ov := range an.Overlaps {
		a, b := ov.First.grant, ov.Second.grant
		if a.made == 0 || b.made == 0 || !a.keyed() || !b.keyed() {
			j.cannot(promiseOverlap, "an overlap's grants do not carry their tokens and keys")
			classed(ov, ClassUndecided)
			continue
		}
		// The holder first in line is the one whose claim is older.
		first, later := a, b
		if b.made < a.made {
			first, later = b, a
		}
		if first.made > later.rev && later.rev > 0 {
			// The claim first in line was created after the other grant's
			// decision: then the other is first in revision order.
			j.cannot(promiseOverlap, fmt.Sprintf("token %d was created after the decision %s %d of token %d", first.made, rev, later.rev, later.made))
			classed(ov, ClassUndecided)
			continue
		}
		c := j.claim[first.belief]
		cl := j.classify(first, later, c)
		classed(ov, cl.class)
		switch cl.class {
		case ClassUndecided:
			j.cannot(promiseOverlap, cl.why)
		case ClassOtherRelease:
			// Another grant's release deleted the first claim: no lease
			// race but promise 4's violation, which releases tells.
			j.bugs++
		case ClassLeaseRace:
			j.races++
		default:
			j.bugs++
			if len(j.violations[promiseOverlap]) > maxStories {
				continue
			}
			j.broke(promiseOverlap, Violation{Key: ov.Key, Processes: []int{int(first.process), int(later.process)}, Tokens: []int64{first.made, later.made},
				From: ov.From, To: ov.To, Faults: h.faultsDuring(ov.From, ov.To),
				Story: fmt.Sprintf("on key %q, %s (token %d, granted %s) and %s (token %d, granted %s %s) both held the lock from %s to %s, but %s's %s (token %d) %s: the second grant was made while the first holder's claim was on the server.",
					ov.Key, h.who(first.process), first.made, h.at(first.ret), h.who(later.process), later.made, h.at(later.ret), cl.decided,
					h.at(ov.From), h.at(ov.To), h.who(first.process), key, first.made, cl.still)})
		}
	}
}

// The classes of an overlap of two holders, by what the server's truth
// says of the first holder's claim at the second grant's decision.
const (
	// ClassLeaseRace: the first claim was gone: the lease race.
	ClassLeaseRace = "lease-race"
	// ClassLockBug: the first claim was certainly on the server: the
	// lock's bug.
	ClassLockBug = "lock-bug"
	// ClassOtherRelease: another grant's release deleted the first claim
	// (promise 4's violation).
	ClassOtherRelease = "other-release"
	// ClassUndecided: the history cannot tell.
	ClassUndecided = "undecided"
)

// OverlapClass is the class of one overlap, by its key and the history
// indices of its two grants (Belief.AcquireIndex).
type OverlapClass struct {
	Key    string `json:"key"`
	First  int    `json:"first"`
	Second int    `json:"second"`
	Class  string `json:"class"`
}

// overlapClass is an overlap's class, with the words its story needs:
// decided says what the second grant was decided on, still where the first
// claim was; why, for an undecided one, why not.
type overlapClass struct {
	class, decided, still, why string
}

// classify judges whether first's claim c was on the server at later's
// decision. The decision point is the lock's own word where it gives one
// (later.rev); else it lies between two bounds the lock's word is not
// needed for: from below, the grant's own key's creation (its token: the
// decision is made on a state that holds it), and from above, a
// linearizable read locktest made after the reply (later.revMax), or, in
// real time, the reply itself: a claim deleted only by its owner's release
// invoked after the reply was on the server at the decision. A bound is
// never taken for the decision itself: a claim gone between the bounds
// leaves the overlap undecided.
func (j *contractJudge) classify(first, later *operation, c claim) overlapClass {
	h := j.h
	key, rev := h.terms().key(), h.terms().revision()
	gone := func() overlapClass {
		if c.del != nil && c.del.By == histories.DeletedByOther && indefinite(*c.del) == "" {
			return overlapClass{class: ClassOtherRelease}
		}
		return overlapClass{class: ClassLeaseRace}
	}
	bug := func(decided string) overlapClass {
		var still string
		switch {
		case c.del != nil:
			still = fmt.Sprintf("was deleted only at %s %d (%s)%s", rev, c.del.Revision, h.at(c.del.Time), deletionCause(h, *c.del))
		case c.before != nil:
			still = fmt.Sprintf("was on the server until %s %d at least (no deletion that could be its %s's is recorded before)", rev, c.lo-1, key)
		default:
			still = fmt.Sprintf("was not deleted by %s %d, the last the observer saw", rev, c.lo-1)
		}
		return overlapClass{class: ClassLockBug, decided: decided, still: still}
	}
	if later.rev > 0 {
		held, ok := c.heldAt(later.rev)
		switch {
		case !ok:
			return overlapClass{class: ClassUndecided, why: fmt.Sprintf("the history does not say whether the %s was deleted by %s %d: %s", j.claimOf(first), rev, later.rev, c.why)}
		case !held:
			return gone()
		}
		return bug(fmt.Sprintf("on a state at %s %d", rev, later.rev))
	}
	if first.rev == 0 && first.revMax == 0 || later.revMax == 0 {
		// A grant with neither says nothing of whether its token is its
		// key's create revision (a lock in another process whose token is
		// not is recorded without them), nor bounds its decision.
		return overlapClass{class: ClassUndecided, why: "the grants carry no decision revision, and no revision_max read by locktest after the reply"}
	}
	// Gone already when the later grant's own key was created: gone at
	// its decision.
	if held, ok := c.heldAt(later.made); ok && !held {
		return gone()
	}
	if later.revMax > 0 {
		if held, ok := c.heldAt(later.revMax); ok && held {
			return bug(fmt.Sprintf("on a state at %s %d or before (locktest read %s %d after the reply)", rev, later.revMax, rev, later.revMax))
		}
	}
	if j.releasedAfter(first, later.ret, c) {
		return bug("(by real-time order: its holder released it only after this reply)")
	}
	why := fmt.Sprintf("the lock does not tell its decision %s, and the %s was deleted at %s %d, after the later grant's own %s was created (%s %d)", rev, j.claimOf(first), rev, c.hi, key, rev, later.made)
	switch {
	case c.hi == math.MaxInt64 || c.lo < c.hi:
		why = fmt.Sprintf("the lock does not tell its decision %s, and the history does not say whether the %s was on the server after %s %d: %s", rev, j.claimOf(first), rev, later.made, c.why)
	case later.revMax > 0:
		why += fmt.Sprintf(" and by %s %d, which locktest read after the reply: the decision lies between", rev, later.revMax)
	default:
		why += ", and locktest has no read after the reply to bound the decision"
	}
	return overlapClass{class: ClassUndecided, why: why}
}

// claimOf names g's claim: "key of token T", or, for a grant without a
// token, "key created at revision R" (its creation point, read from the
// servers).
func (j *contractJudge) claimOf(g *operation) string {
	t := j.h.terms()
	if g.hasTok {
		return fmt.Sprintf("%s of token %d", t.key(), g.tok)
	}
	return fmt.Sprintf("%s created at %s %d", t.key(), t.revision(), g.made)
}

// releasedAfter says whether first's claim c was on the server until after
// t in real time: its one recorded deletion was its owner's release call
// (on a backend whose observer ties it to the call: Terms.ReleaseByCall),
// and the owner's client invoked no release of the lock from before first
// was asked for (none in flight then) until after t.
func (j *contractJudge) releasedAfter(first *operation, t int64, c claim) bool {
	if c.del == nil || c.lo != c.hi || c.del.By != histories.DeletedByRelease || !j.h.terms().ReleaseByCall {
		return false
	}
	owner := j.sd.clients[first.process]
	for _, o := range j.h.ops {
		if o.f != histories.Release || o.key != first.key || o.call > t {
			continue
		}
		if o.process != first.process && (owner == "" || j.sd.clients[o.process] != owner) {
			continue
		}
		if o.missing || o.unknown() || o.ret >= first.call {
			return false
		}
	}
	return true
}

// releases judges promise 4 on the observer's deletions. An other-release
// is definite (the observer says so only when the owner's lease was alive
// and the owner was not releasing), so one breaks the promise whatever else
// the history says; that none happened needs the observer's word that it
// saw every deletion.
func (j *contractJudge) releases() {
	h := j.h
	for _, d := range j.sd.deletions {
		if d.By != histories.DeletedByOther {
			continue
		}
		owner := strings.Join(d.Targets, ",")
		if why := indefinite(d); why != "" {
			j.cannot(promiseRelease, fmt.Sprintf("the deletion at %s (history index %d) is called another grant's release, but %s", h.atRevision(d.Revision, d.Time), d.Index, why))
			continue
		}
		v := Violation{Key: d.Key, Tokens: []int64{d.Token}, From: d.Time, To: d.Time, Faults: h.faultsDuring(d.Time, d.Time)}
		what := "another client's release"
		if d.releasedBy != "" {
			what = fmt.Sprintf("%s's release of its token %s", d.releasedBy, d.releasedToken)
			if tok, err := strconv.ParseInt(d.releasedToken, 10, 64); err == nil {
				if b, ok := j.belief(d.Key, tok, d.Time); ok && b.Ended == "release" {
					what = fmt.Sprintf("the release of token %d by %s (invoked %s%s)", tok, h.who(histories.Process(b.Process)), h.at(b.To), h.unsettled(b))
					v.Processes = append(v.Processes, b.Process)
					v.From = min(v.From, b.To)
				}
			}
		}
		b, ok := j.belief(d.Key, d.Token, d.Time)
		if d.owner >= 0 {
			b, ok = h.beliefBy(d.Key, d.owner, d.Time)
		}
		var victim string
		if ok {
			victim = fmt.Sprintf("%s's %s (token %d, granted %s)", h.who(histories.Process(b.Process)), h.terms().key(), d.Token, h.at(b.From))
			v.Processes = append(v.Processes, b.Process)
		} else {
			victim = fmt.Sprintf("%s's %s (token %d)", cmp.Or(owner, "another client"), h.terms().key(), d.Token)
		}
		v.Story = fmt.Sprintf("on key %q, %s deleted %s at %s, %s.",
			d.Key, what, victim, h.atRevision(d.Revision, d.Time), fmt.Sprintf(j.h.terms().Alive, cmp.Or(owner, "its owner")))
		j.broke(promiseRelease, v)
	}
	if len(j.violations[promiseRelease]) == 0 && !j.sd.observedAll {
		j.cannot(promiseRelease, "the history does not say that the observer saw every deletion (no observed event), so an other-release may be missing")
	}
}

// kept judges promise 6 on the observer's key-kept events: each names a
// process whose release returned ok while the server kept its grant's
// key. The release is that process's last on the key invoked before the
// event; one that did not return ok is not judged (the event says it did).
func (j *contractJudge) kept() {
	h := j.h
	for _, k := range j.sd.kept {
		var rel *operation
		for _, o := range h.ops {
			if o.f == histories.Release && o.process == k.process && o.key == k.key && o.inv < k.index {
				rel = o
			}
		}
		if rel == nil || rel.status != histories.OK || len(j.violations[promiseTaken]) > maxStories {
			continue
		}
		j.broke(promiseTaken, Violation{Key: k.key, Processes: []int{int(k.process)}, From: rel.call, To: max(rel.ret, k.time), Faults: h.faultsDuring(rel.call, k.time),
			Story: fmt.Sprintf("on key %q, the release by %s invoked at %s returned ok at %s, but right after it the server still held its %s, with the value its grant set: the release did not take effect.",
				k.key, h.who(k.process), h.at(rel.call), h.at(rel.ret), h.terms().key())})
	}
}

// fresh judges promise 7 on the observer's key-set events: each tells,
// on the server's clock, when the server set a process's grant's key, took
// its previous attempt, and what came after. A grant whose holder's lock
// said lost (its first lease-lost while it held the grant) before half
// the TTL had passed since that attempt, before the key could have gone
// (its TTL from the set, or a command that may have changed it), before
// any request about it other than its release, and with no fault that
// could touch the holder, its links or the server from that attempt on,
// was called lost while live. One called lost within half a TTL of its
// reply without that evidence (no key-set event, or no earlier attempt)
// leaves the promise unjudged, in a history that has such events; one
// under a fault is passed over. Times of the server are placed in the
// history's by the host's clock, which both share.
func (j *contractJudge) fresh(grants []*operation) {
	h := j.h
	if len(j.sd.sets) == 0 {
		return
	}
	sets := map[histories.Process][]keySet{}
	for _, s := range j.sd.sets {
		sets[s.process] = append(sets[s.process], s)
	}
	lost := map[string][]leaseLost{}
	for _, l := range j.sd.lost {
		if len(l.targets) == 1 {
			lost[l.targets[0]] = append(lost[l.targets[0]], l)
		}
	}
	for _, g := range grants {
		client := j.sd.clients[g.process]
		b := j.sd.beliefs[g.belief]
		ls := lost[client]
		i, _ := slices.BinarySearchFunc(ls, g.ret, func(l leaseLost, t int64) int { return cmp.Compare(l.time, t) })
		for i < len(ls) && ls[i].key != g.key {
			i++
		}
		if client == "" || i == len(ls) || ls[i].time > b.To || len(j.violations[promiseFresh]) > maxStories {
			continue
		}
		at := ls[i].time
		k := slices.IndexFunc(sets[g.process], func(s keySet) bool { return s.key == g.key && g.call <= s.set && s.set <= g.ret })
		if k < 0 || sets[g.process][k].asked < g.call {
			if j.sd.ttl > 0 && at < g.ret+int64(j.sd.ttl/2) && !h.faultNear(client, g.call, at) {
				what := "no key-set event"
				if k >= 0 {
					what = "no attempt before the one that set its " + h.terms().key()
				}
				j.cannot(promiseFresh, fmt.Sprintf("the lock told %s its grant of %s was lost at %s, but the observer tells %s on the server's clock: when its claim's time could begin cannot be bounded", h.who(g.process), h.at(g.ret), h.at(at), what))
			}
			continue
		}
		s := sets[g.process][k]
		half := s.asked + int64(s.ttl/2)
		held := s.set + int64(s.ttl)
		if s.changed >= 0 {
			held = min(held, s.changed)
		}
		asked := s.next >= 0 && (b.Ended != "release" || s.next < b.To)
		if at >= half || at >= held || asked || h.faultNear(client, s.asked, at) {
			continue
		}
		next := "the server took no request about the grant from its client after the set"
		if s.next >= 0 {
			next = fmt.Sprintf("the server took no request about the grant from its client until its release (invoked %s)", h.at(b.To))
		}
		j.broke(promiseFresh, Violation{Key: s.key, Processes: []int{int(s.process)}, Tokens: []int64{b.Token}, From: s.asked, To: at,
			Story: fmt.Sprintf("on key %q, %s was granted the lock at %s (invoked %s); the server had taken its previous attempt at %s and set its %s at %s with a TTL of %s, and still held it, but at %s, %s after that attempt, the lock told its client the grant was lost: %s, and no fault touched the client, its links or the server. However the lock counts its claim's time from a moment after that attempt's reply, more than half the TTL was left: it gave up a live grant, and stopped renewing it.",
				s.key, h.who(s.process), h.at(g.ret), h.at(g.call), h.at(s.asked), h.terms().key(), h.at(s.set), s.ttl, h.at(at), time.Duration(at-s.asked).Round(time.Millisecond), next)})
	}
}

// sessions judges promise 8: the key of a grant that tells its grantee's
// session is that session's, by the lease the deletion of its claim names.
// A claim whose deletion the history does not tell apart, or that names no
// lease, leaves it unjudged.
func (j *contractJudge) sessions(grants []*operation) {
	h := j.h
	for _, g := range grants {
		if g.session == "" {
			continue
		}
		c := j.claim[g.belief]
		d := c.del
		switch {
		case g.made == 0:
			j.cannot(promiseSession, "a grant that tells its session carries no token and no creation point of its key")
		case d == nil || c.lo != c.hi:
			j.cannot(promiseSession, fmt.Sprintf("the history does not say which deletion was the %s: %s", j.claimOf(g), c.why))
		case d.Lease == "":
			j.cannot(promiseSession, fmt.Sprintf("the deletion of the %s (history index %d) names no session", j.claimOf(g), d.Index))
		case d.Lease != g.session && len(j.violations[promiseSession]) <= maxStories:
			j.broke(promiseSession, Violation{Key: g.key, Processes: []int{int(g.process)}, Tokens: []int64{g.tok}, From: g.ret, To: max(g.ret, d.Time),
				Faults: h.faultsDuring(g.call, g.ret),
				Story: fmt.Sprintf("on key %q, %s was granted at %s on the %s, and its lock said it was on session %s; but the %s was session %s's (the servers deleted it at %s, by %s): the grant held a claim of another session, which nothing of the grantee's keeps.",
					g.key, h.who(g.process), h.at(g.ret), j.claimOf(g), g.session, h.terms().key(), d.Lease, h.atRevision(d.Revision, d.Time), orUnsaid(d.By))})
		}
	}
}

// orUnsaid is a deletion's cause, or words for none.
func orUnsaid(by string) string {
	if by == "" {
		return "a cause the observer could not tell"
	}
	return by
}

// indefinite says why an other-release deletion is not definite, or ""
// when it is: the owner's lease was alive, and the release was another
// client's, or its owner's of another grant (a retried release of an older
// one, etcd#22082).
func indefinite(d Deletion) string {
	owner := strings.Join(d.Targets, ",")
	switch {
	case d.leaseAlive == "false":
		return "its lease was gone, so the server may have deleted it"
	case d.releasedBy != "" && d.releasedBy == owner:
		if tok, err := strconv.ParseInt(d.releasedToken, 10, 64); err != nil || d.Token <= 0 || tok == d.Token {
			return "the release was its owner's own, of no other grant the history names"
		}
	}
	return ""
}

// unsettled says, of a belief that ended in a release, that its client
// never learned the release's outcome (", ..."), or "".
func (h *History) unsettled(b Belief) string {
	for _, o := range h.ops {
		if o.f == histories.Release && int(o.process) == b.Process && o.key == b.Key && o.call == b.To {
			if o.status == histories.Info {
				return "; its client never learned its outcome"
			}
			break
		}
	}
	return ""
}

// live judges promise 5: no holder's lease expires on the server while no
// fault was active during its last TTL (plus expirySlack; see there), but
// faults on other clients only (faultNear), and
// locktest's own process ran throughout (no stall event then, in a
// history whose setup says it watched for them).
func (j *contractJudge) live() {
	h := j.h
	if j.sd.ttl == 0 {
		j.cannot(promiseLive, "the history does not record the lease TTL")
		return
	}
	window := addSat(addSat(j.sd.ttl, j.sd.ttl), expirySlack)
	for _, d := range j.sd.deletions {
		if d.By != histories.DeletedByExpiry || h.revokedAt(d) {
			continue
		}
		// others: faults were active, but each on other clients only,
		// which no session of the holder's feels. Such an expiry is
		// judged only where it definitely breaks the promise; where it
		// could not be judged it is passed over, as under any fault.
		others := h.faultDuring(d.Time-int64(window), d.Time)
		b, ok, why := j.holderAt(d)
		if others && (why != "" || !ok || h.faultNear(j.sd.clients[histories.Process(b.Process)], d.Time-int64(window), d.Time)) {
			continue
		}
		switch {
		case why != "":
			j.cannot(promiseLive, why)
			continue
		case !ok:
			continue
		case d.leaseAlive != "false" && others:
			continue
		case d.leaseAlive != "false":
			j.cannot(promiseLive, fmt.Sprintf("the observer could not confirm that the lease of token %d was gone when its %s was deleted at %s", d.Token, h.terms().key(), h.at(d.Time)))
			continue
		}
		if set, what, ok := j.keySetBound(b); ok && d.Time < set+int64(j.sd.ttl) {
			// Not this grant's key: one its acquire set lives a TTL.
			if !others {
				j.cannot(promiseLive, fmt.Sprintf("the observer put the expiry at %s down to the key of token %d held by %s, but its key, %s %s, could not expire before %s: it was another key, such as one an acquire whose reply was lost set",
					h.at(d.Time), b.Token, h.who(histories.Process(b.Process)), what, h.at(set), h.at(set+int64(j.sd.ttl))))
			}
			continue
		}
		total, s := h.stalled(d.Time-int64(window), d.Time)
		if others && (total >= j.sd.ttl/stallShare || j.sd.setup[histories.SetupStalls] != histories.StallsWatched) {
			continue
		}
		if total >= j.sd.ttl/stallShare {
			// A holder whose process does not run cannot renew: the
			// host paused it, as a pause fault would.
			j.cannot(promiseLive, fmt.Sprintf("the lease of token %d held by %s expired on the server at %s, but locktest's own process, its client's, was not run for %s in the %s before (the longest stall %s, from %s to %s): a holder that is not run cannot renew, as under a pause",
				b.Token, h.who(histories.Process(b.Process)), h.at(d.Time), total.Round(time.Millisecond), window, time.Duration(s.End-s.Start).Round(time.Millisecond), h.at(s.Start), h.at(s.End)))
			continue
		}
		if j.sd.setup[histories.SetupStalls] == histories.StallsNotTheLocks {
			j.cannot(promiseLive, fmt.Sprintf("the lease of token %d held by %s expired on the server at %s with no fault, but the lock runs in a process of its own, whose stalls locktest cannot see (the host not running it, its runtime pausing it): a holder that is not run cannot renew",
				b.Token, h.who(histories.Process(b.Process)), h.at(d.Time)))
			continue
		}
		if j.sd.setup[histories.SetupStalls] != histories.StallsWatched {
			j.cannot(promiseLive, fmt.Sprintf("the lease of token %d held by %s expired on the server at %s with no fault, but the history does not say that locktest watched its own process for stalls (a history from before stall events), and a holder that is not run cannot renew",
				b.Token, h.who(histories.Process(b.Process)), h.at(d.Time)))
			continue
		}
		if len(j.violations[promiseLive]) > maxStories {
			continue
		}
		since := fmt.Sprintf("in the %s before", window)
		if d.Time-h.start < int64(window) {
			since = "since the history began"
		}
		if others {
			since += " but on other clients, which reach their own sessions only"
		}
		j.broke(promiseLive, Violation{Key: d.Key, Processes: []int{b.Process}, Tokens: []int64{b.Token}, From: b.From, To: d.Time,
			Story: fmt.Sprintf("on key %q, %s of %s, which held token %d since %s, expired on the server: its %s was deleted at %s, and no fault was active %s.",
				d.Key, j.h.terms().Claim, h.who(histories.Process(b.Process)), b.Token, h.at(b.From), h.terms().key(), h.atRevision(d.Revision, d.Time), since)})
	}
}

// holderAt finds the belief of the holder whose key d deleted, if it
// believed it held the lock when the deletion was recorded: the owner the
// observer names, else the grant of the key's create revision. why says
// when the history cannot tell whose key it was.
func (j *contractJudge) holderAt(d Deletion) (b Belief, ok bool, why string) {
	h := j.h
	active := func(b Belief) bool { return b.From <= d.Time && d.Time <= b.To }
	if d.owner >= 0 {
		b, ok = h.beliefBy(d.Key, d.owner, d.Time)
		return b, ok && active(b), ""
	}
	var found []Belief
	if d.Token > 0 {
		for _, i := range h.tokenBeliefs(d.Key, d.Token) {
			if b := h.sd.beliefs[i]; active(b) {
				found = append(found, b)
			}
		}
	} else {
		h.beliefsAt(d.Key, d.Time, func(b Belief) bool {
			found = append(found, b)
			return len(found) < 2
		})
	}
	switch {
	case len(found) == 1 && d.Token > 0:
		return found[0], true, ""
	case len(found) > 0:
		return Belief{}, false, fmt.Sprintf("the history cannot tell whose key was deleted at %s (history index %d): it names no owner, and %s held the lock then",
			h.atRevision(d.Revision, d.Time), d.Index, words.Plural(len(found), "holder"))
	}
	return Belief{}, false, ""
}

// keySetBound is, where a grant's key carries its own TTL (Terms.KeyTTL),
// the earliest time the key of b's grant can have been set: the server's
// own time of the set where a key-set event tells it, else the acquire's
// invocation. The invocation alone is a loose bound for an acquire that
// waited long: redis-setnx seed 479, asked 22.7 s before its grant, whose
// key the observer blamed for the expiry, 1 ms after the set, of the key
// an acquire with a lost reply had left.
func (j *contractJudge) keySetBound(b Belief) (at int64, what string, ok bool) {
	g := b.grant
	if !j.h.terms().KeyTTL || g == nil {
		return 0, "", false
	}
	for _, s := range j.sd.sets {
		if s.process == g.process && s.key == g.key && g.call <= s.set && s.set <= g.ret {
			return s.set, "set on the server at", true
		}
	}
	return g.call, "set by its acquire, invoked at", true
}

// belief finds the belief of the grant of token on key ("": any) that began
// last by t.
func (j *contractJudge) belief(key string, token, t int64) (Belief, bool) {
	var found Belief
	ok := false
	for _, i := range j.h.tokenBeliefs(key, token) {
		if b := j.sd.beliefs[i]; b.From <= t && (!ok || b.From >= found.From) {
			found, ok = b, true
		}
	}
	return found, ok
}
