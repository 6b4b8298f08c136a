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
// why (each check's Cut rule in the registry); a violation found stays
// invalid, as the records that show it are there. It returns the cut, nil
// if there is none. bound is the liveness bound the liveness check used.
func (h *History) JudgeCut(rs []Result, bound time.Duration) *Cut {
	c := h.Cut()
	if c == nil {
		return c
	}
	for i := range rs {
		r := &rs[i]
		if check, ok := lookup(r.Name); ok && check.Cut != nil {
			if why := check.Cut(h, *r, c, bound); why != "" {
				r.Verdict, r.Explanation, r.Violations = Unknown, why, nil
			}
		}
	}
	return c
}

// unhealed says whether faults began and no final heal followed.
func (h *History) unhealed() bool {
	return len(h.story().faults) > 0 && h.story().heal < 0
}
