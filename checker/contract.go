// The contract check: the five promises a lease-based lock can keep.

package checker

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locktest/locktest/histories"
)

// The contract check judges what a lease-based lock can promise, and is
// invalid exactly when a promise definitely broke; an overlap of holders
// that the lease race explains is not a broken promise. The promises:
//
//  1. Tokens grow: a grant's token is greater than every token returned by
//     a grant of the same lock before this grant was invoked.
//  2. No grant of a lost lock: the state the grant was decided on (its
//     decision revision: the newest revision the client's lock had read
//     when Acquire returned) still holds the grantee's claim (its key).
//  3. Overlap only after loss: when two holders' beliefs overlap, the
//     claim of the one first in line (the lower token) was gone in the
//     state the other's grant was decided on.
//  4. Release only your own: no release deleted another client's key
//     (the observer's definite "other-release").
//  5. A live holder keeps its claim: a holder's lease does not expire on
//     the server while no fault was active during its last TTL.
//
// Order is judged by revisions (a backend whose server has none says so in
// its Terms, and promises 2 and 3 are then not judged): a claim is the key
// created at the token's revision (the token of every built-in recipe of a
// server with revisions is its key's create revision), lost at the
// revision of its key-deleted event, or after the history's "observed"
// revision if it has no such event.
const (
	promiseTokens  = "1 (tokens grow)"
	promiseLost    = "2 (no grant of a lost lock)"
	promiseOverlap = "3 (overlap only after loss)"
	promiseRelease = "4 (release only your own)"
	promiseLive    = "5 (a live holder keeps its claim)"
)

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

// Contract checks the lock's contract; see History.Contract.
func Contract(ops []histories.Op) Result { return Build(ops).Contract() }

// contractJudge collects one run of the contract check.
type contractJudge struct {
	h          *History
	sd         *storyData
	violations map[string][]Violation
	unjudged   map[string]string // promise → why not (first reason)
	races      int
	bugs       int
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
	j.violations[promise] = append(j.violations[promise], v)
}

// claimEnd is the deletion that ended the claim of a grant of key with
// token, if the history holds one.
func (j *contractJudge) claimEnd(key string, token int64) (Deletion, bool) {
	for _, d := range j.sd.deletions {
		if d.Key == key && d.Token == token && d.Revision > 0 {
			return d, true
		}
	}
	return Deletion{}, false
}

// heldAt says whether the claim of a grant (key, token) was on the server in
// the state at revision rev; ok is false if the history cannot tell.
func (j *contractJudge) heldAt(key string, token, rev int64) (held bool, d Deletion, ok bool) {
	if d, found := j.claimEnd(key, token); found {
		return token <= rev && rev < d.Revision, d, true
	}
	if j.sd.observed > 0 && rev <= j.sd.observed {
		return token <= rev, Deletion{}, true
	}
	return false, Deletion{}, false
}

// Contract judges the five promises a lease-based lock can keep (see the
// constants above). It is invalid if one definitely broke; unknown, naming
// the promises it could not judge and why, if the history lacks what one
// needs (decision revisions, the grants' keys, the observer's deletions, the
// TTL) or holds no grant at all; valid otherwise. Overlapping holders are
// counted as the lease race (the earlier claim was lost first: expected of
// any lease lock) or as bugs in the lock.
func (h *History) Contract() Result {
	began := time.Now()
	res := Result{Name: histories.CheckContract, Verdict: Unknown}
	if h.err != nil {
		res.Explanation = "The history is malformed: " + h.err.Error() + "."
		return res
	}
	j := &contractJudge{h: h, sd: h.story(), violations: map[string][]Violation{}, unjudged: map[string]string{}}
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
	j.tokens(grants)
	j.lost(grants)
	j.overlaps()
	j.releases()
	j.live()
	res.LeaseRaces, res.LockBugs = j.races, j.bugs

	var lines []string
	for _, p := range []string{promiseTokens, promiseLost, promiseOverlap, promiseRelease, promiseLive} {
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
	for _, p := range []string{promiseTokens, promiseLost, promiseOverlap, promiseRelease, promiseLive} {
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
	if why := j.noRevisions(); why != "" {
		j.cannot(promiseLost, why)
		return
	}
	for _, g := range grants {
		switch {
		case !g.hasTok:
			j.cannot(promiseLost, "a grant carries no token")
			continue
		case g.rev == 0:
			j.cannot(promiseLost, "the grants carry no decision revision (a history recorded before locktest recorded them)")
			continue
		case !g.keyed:
			j.cannot(promiseLost, j.h.terms().Unkeyed)
			continue
		}
		held, d, ok := j.heldAt(g.key, g.tok, g.rev)
		switch {
		case !ok:
			j.cannot(promiseLost, fmt.Sprintf("the history does not say whether the key of token %d was deleted by revision %d (no key-deleted event and no observed revision)", g.tok, g.rev))
		case !held && d.Revision > 0 && len(j.violations[promiseLost]) <= maxStories:
			waited := ""
			if g.call <= d.Time && d.Time <= g.ret {
				waited = " while it waited"
			}
			j.broke(promiseLost, Violation{Key: g.key, Processes: []int{int(g.process)}, Tokens: []int64{g.tok},
				From: d.Time, To: g.ret, Faults: h.faultsDuring(min(d.Time, g.call), g.ret),
				Story: fmt.Sprintf("on key %q, %s was granted token %d at %s (asked at %s) on a state at revision %d, but the server had deleted its key (token %d) at revision %d (%s)%s%s: it was granted a lock whose key was already gone.",
					g.key, h.who(g.process), g.tok, h.at(g.ret), h.at(g.call), g.rev, g.tok, d.Revision, h.at(d.Time), deletionCause(h, d), waited)})
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
	case "acquire":
		return ": its owner deleted it after a failed wait"
	case histories.DeletedByOther:
		return ": another client's release deleted it"
	}
	return ""
}

// overlaps judges promise 3 on every overlap of two holders' beliefs.
func (j *contractJudge) overlaps() {
	h := j.h
	an := h.Overlaps()
	if an.Truncated {
		j.cannot(promiseOverlap, fmt.Sprintf("more than %d overlaps; only the first were judged", MaxOverlaps))
	}
	if why := j.noRevisions(); why != "" && len(an.Overlaps) > 0 {
		j.cannot(promiseOverlap, why)
		return
	}
	grant := map[int]*operation{} // by acquire index
	for _, o := range h.ops {
		if o.f == histories.Acquire && o.status == histories.OK {
			grant[o.inv] = o
		}
	}
	for _, ov := range an.Overlaps {
		a, b := grant[ov.First.AcquireIndex], grant[ov.Second.AcquireIndex]
		if a == nil || b == nil || !a.hasTok || !b.hasTok || !a.keyed || !b.keyed {
			j.cannot(promiseOverlap, "an overlap's grants do not carry their tokens and keys")
			continue
		}
		// The holder first in line is the one whose claim is older.
		first, later := a, b
		if b.tok < a.tok {
			first, later = b, a
		}
		if later.rev == 0 {
			j.cannot(promiseOverlap, "the grants carry no decision revision")
			continue
		}
		held, d, ok := j.heldAt(first.key, first.tok, later.rev)
		switch {
		case !ok:
			j.cannot(promiseOverlap, fmt.Sprintf("the history does not say whether the key of token %d was deleted by revision %d", first.tok, later.rev))
		case !held && first.tok <= later.rev:
			j.races++
		case !held:
			// The claim first in line was created after the other grant's
			// decision: then the other is first in revision order.
			j.cannot(promiseOverlap, fmt.Sprintf("token %d was created after the decision revision %d of token %d", first.tok, later.rev, later.tok))
		default:
			j.bugs++
			if len(j.violations[promiseOverlap]) > maxStories {
				continue
			}
			var still string
			if d.Revision > 0 {
				still = fmt.Sprintf("was deleted only at revision %d (%s)%s", d.Revision, h.at(d.Time), deletionCause(h, d))
			} else {
				still = fmt.Sprintf("was not deleted by revision %d, the last the observer saw", j.sd.observed)
			}
			j.broke(promiseOverlap, Violation{Key: ov.Key, Processes: []int{int(first.process), int(later.process)}, Tokens: []int64{first.tok, later.tok},
				From: ov.From, To: ov.To, Faults: h.faultsDuring(ov.From, ov.To),
				Story: fmt.Sprintf("on key %q, %s (token %d, granted %s) and %s (token %d, granted %s on a state at revision %d) both held the lock from %s to %s, but %s's key (token %d) %s: the second grant was made while the first holder's claim was on the server.",
					ov.Key, h.who(first.process), first.tok, h.at(first.ret), h.who(later.process), later.tok, h.at(later.ret), later.rev,
					h.at(ov.From), h.at(ov.To), h.who(first.process), first.tok, still)})
		}
	}
}

// releases judges promise 4 on the observer's deletions.
func (j *contractJudge) releases() {
	h := j.h
	if !j.sd.observedAll {
		j.cannot(promiseRelease, "the history does not say that the observer saw every deletion (no observed event), so an other-release may be missing or not definite")
		return
	}
	for _, d := range j.sd.deletions {
		if d.By != histories.DeletedByOther {
			continue
		}
		owner := strings.Join(d.Targets, ",")
		v := Violation{Key: d.Key, Tokens: []int64{d.Token}, From: d.Time, To: d.Time, Faults: h.faultsDuring(d.Time, d.Time)}
		what := "another client's release"
		if releaser := d.params["released_by"]; releaser != "" {
			what = fmt.Sprintf("%s's release of its token %s", releaser, d.params["released_token"])
			if tok, err := strconv.ParseInt(d.params["released_token"], 10, 64); err == nil {
				if b, ok := j.belief(d.Key, tok, d.Time); ok && b.Ended == "release" {
					what = fmt.Sprintf("the release of token %d by %s (invoked %s)", tok, h.who(histories.Process(b.Process)), h.at(b.To))
					v.Processes = append(v.Processes, b.Process)
					v.From = b.To
				}
			}
		}
		victim := owner
		if b, ok := j.belief(d.Key, d.Token, d.Time); ok {
			victim = fmt.Sprintf("%s's key (token %d, granted %s)", h.who(histories.Process(b.Process)), d.Token, h.at(b.From))
			v.Processes = append(v.Processes, b.Process)
		} else {
			victim = fmt.Sprintf("%s's key (token %d)", owner, d.Token)
		}
		v.Story = fmt.Sprintf("on key %q, %s deleted %s at %s, %s.",
			d.Key, what, victim, h.atRevision(d.Revision, d.Time), fmt.Sprintf(j.h.terms().Alive, owner))
		j.broke(promiseRelease, v)
	}
}

// live judges promise 5: no holder's lease expires on the server while no
// fault was active during its last TTL (plus expirySlack; see there).
func (j *contractJudge) live() {
	h := j.h
	if j.sd.ttl == 0 {
		j.cannot(promiseLive, "the history does not record the lease TTL")
		return
	}
	window := 2*j.sd.ttl + expirySlack
	for _, d := range j.sd.deletions {
		if d.By != histories.DeletedByExpiry || h.revokedAt(d) {
			continue
		}
		b, ok := j.holderAt(d)
		if !ok || len(h.faultsDuring(d.Time-int64(window), d.Time)) > 0 {
			continue
		}
		if d.params["lease_alive"] != "false" {
			j.cannot(promiseLive, fmt.Sprintf("the observer could not confirm that the lease of token %d was gone when its key was deleted at %s", d.Token, h.at(d.Time)))
			continue
		}
		if len(j.violations[promiseLive]) > maxStories {
			continue
		}
		j.broke(promiseLive, Violation{Key: d.Key, Processes: []int{b.Process}, Tokens: []int64{d.Token}, From: b.From, To: d.Time,
			Story: fmt.Sprintf("on key %q, %s of %s, which held token %d since %s, expired on the server: its key was deleted at %s, and no fault was active in the %s before.",
				d.Key, j.h.terms().Claim, h.who(histories.Process(b.Process)), d.Token, h.at(b.From), h.atRevision(d.Revision, d.Time), window)})
	}
}

// holderAt finds the belief of the grant whose key d deleted, if its holder
// believed it held the lock when the deletion was recorded.
func (j *contractJudge) holderAt(d Deletion) (Belief, bool) {
	b, ok := j.belief(d.Key, d.Token, d.Time)
	return b, ok && b.From <= d.Time && d.Time <= b.To
}

// belief finds the belief of the grant of token on key that began last
// before t.
func (j *contractJudge) belief(key string, token, t int64) (Belief, bool) {
	var found Belief
	ok := false
	for _, b := range j.sd.beliefs {
		if b.Key == key && b.HasToken && b.Token == token && b.From <= t {
			found, ok = b, true
		}
	}
	return found, ok
}
