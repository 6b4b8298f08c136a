// Histories cut short: a run killed (or interrupted) before its end leaves
// a history that stops part way. The checks judge what it holds; what the
// cut could hide is unknown, never valid.

package checker

import (
	"fmt"
	"strings"
	"time"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/words"
)

// Cut says where and how a history stops short of its run's end.
type Cut struct {
	// Interrupted says the run recorded its end, interrupted (its clients
	// stopped at once); otherwise it recorded none: it was killed.
	Interrupted bool `json:"interrupted,omitempty"`
	// Line and Time are the line and time of the history's last record.
	Line int   `json:"line"`
	Time int64 `json:"time_ns"`
	// Missing names what the run's end records and the history lacks.
	Missing []string `json:"missing,omitempty"`
	// InFlight counts client operations with no completion.
	InFlight int `json:"in_flight"`
	// Summary says all this in one line.
	Summary string `json:"summary"`
}

// Cut says whether the history stops short of its run's end, and where:
// the run promised an end event (its setup event says so) and recorded
// none, or recorded one saying it was interrupted. Nil for a history that
// ends as its run did, and for one that does not say: older histories and
// hand-written ones are judged as they always were.
func (h *History) Cut() *Cut {
	sd := h.story()
	if h.records == 0 {
		return &Cut{Missing: []string{"no setup event", "no end event"},
			Summary: "cut short: the history is empty; a run records its setup first, so this one was cut short before it recorded anything"}
	}
	promised, ended, interrupted := sd.setup["end"] == histories.EndRecorded, sd.ended, sd.interrupted
	if !interrupted && (ended || !promised) {
		return nil
	}
	c := &Cut{Interrupted: interrupted, Time: h.end - 1}
	last := sd.lastIndex
	for _, o := range h.ops {
		last = max(last, o.inv, o.done)
		if o.missing {
			c.InFlight++
		}
	}
	c.Line = last + 1
	if h.unhealed() {
		c.Missing = append(c.Missing, "no final heal")
	}
	if !sd.observedAll {
		c.Missing = append(c.Missing, "no observed event")
	}
	if !ended {
		c.Missing = append(c.Missing, "no end event")
	}
	what := fmt.Sprintf("the history stops at line %d (%s) without the run's end", c.Line, h.at(c.Time))
	if interrupted {
		what = fmt.Sprintf("the run was interrupted; its history stops at line %d (%s)", c.Line, h.at(c.Time))
	}
	var details []string
	if len(c.Missing) > 0 {
		details = append(details, strings.Join(c.Missing, ", "))
	}
	if c.InFlight > 0 {
		details = append(details, words.Count(c.InFlight, "operation was", "operations were")+" in flight")
	}
	if len(details) > 0 {
		what += " (" + strings.Join(details, "; ") + ")"
	}
	c.Summary = "cut short: " + what + ": what the cut could hide is unknown"
	return c
}

// JudgeCut finds whether the history was cut short (see Cut) and, if it
// was, makes unknown each verdict of rs that the cut could hide, saying
// why; a violation found stays invalid, as the records that show it are
// there. It returns the cut, nil if there is none. bound is the liveness
// bound the liveness check used.
//
// What a cut hides: liveness is judged after the final heal, over the quiet
// period that follows it, which the cut ended; the invariant needs the value
// the run left, read at its end; the resource check cannot tell whether the
// resource accepted a write in flight unless the resource's log says; the
// members' hashes are taken at the end. The mutex check judges the holds
// recorded, and the contract check says itself what it could not judge
// without the observer's last event.
func (h *History) JudgeCut(rs []Result, bound time.Duration) *Cut {
	c := h.Cut()
	if c == nil {
		return c
	}
	at := h.at(c.Time)
	unknown := func(r *Result, why string) {
		r.Verdict, r.Explanation, r.Violations = Unknown, why, nil
	}
	for i := range rs {
		r := &rs[i]
		switch r.Name {
		case histories.CheckLiveness:
			h.cutLiveness(r, c, bound, unknown)
		case histories.CheckInvariant:
			if r.Verdict == Valid {
				unknown(r, fmt.Sprintf("The run was cut short at %s, before its final reads: the value it left is not known, so a lost update cannot be ruled out.", at))
			}
		case histories.CheckResource:
			if n, inFlight := h.unsettledWrites(); r.Verdict == Valid && n > 0 {
				unknown(r, fmt.Sprintf("The run was cut short at %s: %s of unknown outcome (%d in flight at the cut) are in no resource log that says whether the resource accepted them, and a stale write it accepted could hide among them.",
					at, words.Plural(n, "write"), inFlight))
			}
		case histories.CheckConsistency:
			if r.Verdict == Valid || r.Verdict == Unknown && r.Ops == 0 {
				unknown(r, fmt.Sprintf("The run was cut short at %s, before the members' hashes were taken: nothing was compared.", at))
			}
		}
	}
	return c
}

// cutLiveness judges what the cut leaves of the liveness verdict r.
func (h *History) cutLiveness(r *Result, c *Cut, bound time.Duration, unknown func(*Result, string)) {
	at := h.at(c.Time)
	from, since := h.start, "the start"
	if heal := h.story().heal; heal >= 0 {
		from, since = heal, "the final heal"
	}
	switch {
	case h.unhealed():
		unknown(r, fmt.Sprintf("The run was cut short at %s, before its final heal: liveness is judged only after it.", at))
	case r.Verdict == Valid:
		unknown(r, fmt.Sprintf("The run was cut short at %s, %s after %s: acquires asked in its last %v could not be judged, and the rest of its quiet period was not recorded (until then, every client that asked got the lock within the bound).",
			at, fmt.Sprintf("%.2f s", time.Duration(c.Time-from).Seconds()), since, bound))
	}
	// A lock that granted nothing is judged so by the liveness check only
	// once an acquire waited the bound: a cut before leaves it unknown.
}

// unhealed says whether faults began and no final heal followed.
func (h *History) unhealed() bool {
	return len(h.story().faults) > 0 && h.story().heal < 0
}

// unsettledWrites counts the writes of unknown outcome that no resource
// log settled, and of them those in flight when the history stops. With a
// resource the system under test keeps (etcd's etcd-txn: the setup's
// resource is not the HTTP store), which keeps no log, only those in
// flight count: the others are unknown in a whole run too.
func (h *History) unsettledWrites() (n, inFlight int) {
	r := h.story().setup["resource"]
	txn := r != "" && r != "http"
	for _, o := range h.ops {
		if o.f != histories.Write || o.status != histories.Info || o.applied || o.lost || txn && !o.missing {
			continue
		}
		n++
		if o.missing {
			inFlight++
		}
	}
	return n, inFlight
}
