package shrink

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locktest/locktest/internal/words"
	"github.com/locktest/locktest/nemesis"
)

// Describe says what a schedule entry does: "pause-client c2 at 2.0 s for
// 3.4 s". w, when the entry struck, names its targets as they resolved.
func Describe(e nemesis.Entry, w Window) string {
	who := e.Target
	if w.Struck && len(w.Targets) > 0 {
		who = strings.Join(w.Targets, ",")
	}
	s := e.Fault
	if who != "" {
		s += " " + who
	}
	s += fmt.Sprintf(" at %.1f s", e.At.Seconds())
	if e.Duration > 0 {
		s += fmt.Sprintf(" for %.1f s", e.Duration.Seconds())
	}
	return s
}

// String says what the candidate runs: "2 faults (pause-client, isolate)
// over 12 s, quiet 8 s, 5 clients"; the kinds when there are three at most.
func (c Candidate) String() string {
	faults := words.Plural(c.Faults(), "fault")
	if n := c.Faults(); n > 0 && n <= 3 {
		var kinds []string
		for _, e := range c.Schedule.Entries {
			kinds = append(kinds, e.Fault)
		}
		faults += " (" + strings.Join(kinds, ", ") + ")"
	}
	// The quiet period too: two candidates may differ only in it.
	return fmt.Sprintf("%s over %s, quiet %s, %d clients", faults, secs(c.Time), secs(c.Quiet), c.Clients)
}

// Summary says in a line what shrinking did: "12 faults over 30 s → 1
// fault (pause-client c2 at 2.0 s for 3.4 s) over 8 s". w are the windows
// of best's entries in one of its runs (nil: targets as scheduled).
func Summary(orig, best Candidate, w []Window) string {
	after := words.Plural(best.Faults(), "fault")
	if best.Faults() == 0 {
		after = "no faults"
	}
	if n := best.Faults(); n > 0 && n <= 3 {
		var ds []string
		for i, e := range best.Schedule.Entries {
			ds = append(ds, Describe(e, windowAt(w, i)))
		}
		after += " (" + strings.Join(ds, "; ") + ")"
	}
	s := fmt.Sprintf("%s over %s → %s over %s", words.Plural(orig.Faults(), "fault"), secs(orig.Time), after, secs(best.Time))
	if best.Clients != orig.Clients {
		s += fmt.Sprintf(", %d clients instead of %d", best.Clients, orig.Clients)
	}
	return s
}

// Removed describes the faults of orig that best left out; w are their
// windows in the original run.
func Removed(orig, best Candidate, w []Window) []string {
	var out []string
	for i, e := range orig.Schedule.Entries {
		if !slices.Contains(best.Kept, i) {
			out = append(out, Describe(e, windowAt(w, i)))
		}
	}
	return out
}

// Changed says what best changed in the faults it kept and in the run's
// settings.
func Changed(orig, best Candidate) []string {
	var out []string
	for i, e := range best.Schedule.Entries {
		was := orig.Schedule.Entries[best.Kept[i]]
		name := fmt.Sprintf("%s (at %.1f s)", was.Fault, was.At.Seconds())
		if e.At != was.At {
			name = fmt.Sprintf("%s (was at %.1f s)", was.Fault, was.At.Seconds())
			out = append(out, fmt.Sprintf("%s starts at %.1f s", name, e.At.Seconds()))
		}
		if e.Duration != was.Duration {
			out = append(out, fmt.Sprintf("%s lasts %.1f s (was %.1f s)", name, e.Duration.Seconds(), was.Duration.Seconds()))
		}
		if e.Target != was.Target {
			out = append(out, fmt.Sprintf("%s strikes %s (was %s)", name, e.Target, was.Target))
		}
	}
	for _, c := range []struct {
		flag      string
		was, is   time.Duration
		wasN, isN int
	}{{"time", orig.Time, best.Time, 0, 0}, {"quiet", orig.Quiet, best.Quiet, 0, 0}, {"clients", 0, 0, orig.Clients, best.Clients}} {
		switch {
		case c.was != c.is:
			out = append(out, fmt.Sprintf("--%s %s (was %s)", c.flag, c.is, c.was))
		case c.wasN != c.isN:
			out = append(out, fmt.Sprintf("--%s %d (was %d)", c.flag, c.isN, c.wasN))
		}
	}
	return out
}

func windowAt(w []Window, i int) Window {
	if i < len(w) {
		return w[i]
	}
	return Window{}
}

// secs is a duration in seconds, to a tenth: "30 s", "8.5 s".
func secs(d time.Duration) string {
	return strconv.FormatFloat(math.Round(d.Seconds()*10)/10, 'f', -1, 64) + " s"
}
