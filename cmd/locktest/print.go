package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/words"
)

// printChecks writes one line per check, and the explanation of any check
// that is not valid.
func printChecks(w io.Writer, r *harness.Results) {
	for _, warning := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warning)
	}
	if r.CutShort != nil {
		fmt.Fprintln(w, r.CutShort.Summary)
	}
	for _, c := range r.Checks {
		req := ""
		if slices.Contains(r.Required, c.Name) {
			req = " (required)"
		}
		fmt.Fprintf(w, "  %-11s %-8s %s%s\n", c.Name, c.Verdict, checker.Summary(c, r.Paired()), req)
		if c.Verdict != checker.Valid && c.Explanation != "" {
			// The first story in full; the rest are in results.json.
			lines := strings.Split(c.Explanation, "\n")
			fmt.Fprintf(w, "              %s\n", lines[0])
			if len(lines) > 1 {
				fmt.Fprintf(w, "              (%d more lines of explanation in results.json)\n", len(lines)-1)
			}
		}
	}
	switch {
	case r.WritesRejected > 0 && r.NoFencingToken:
		fmt.Fprintf(w, "  the resource rejected %s whose token was lower than one it had seen (the recipe's token is not a fencing token)\n", words.Plural(r.WritesRejected, "write"))
	case r.WritesRejected > 0:
		fmt.Fprintf(w, "  the resource rejected %s that carried a stale fencing token\n", words.Plural(r.WritesRejected, "write"))
	}
	fmt.Fprintf(w, "verdict: %s (required: %s)\n", r.Verdict, strings.Join(r.Required, ", "))
	if sc := r.Scenario; sc != nil && sc.Met != nil {
		switch {
		case *sc.Met:
			fmt.Fprintf(w, "scenario %s: as expected (%s)\n", sc.Name, sc.ExpectText())
		case sc.Unstaged != "" && sc.Exit != nil && *sc.Exit == harness.ExitUnknown:
			fmt.Fprintf(w, "scenario %s: unknown: %s, but the run did not stage it (%s)\n", sc.Name, sc.MissedText(), sc.Unstaged)
		default:
			fmt.Fprintf(w, "scenario %s: NOT as expected: %s\n", sc.Name, sc.MissedText())
		}
	}
}

// printSummary writes what a run did, its checks, a plain reading of them,
// and where the files are.
func printSummary(w io.Writer, r *harness.Results) {
	if r.Interrupted && r.CutShort == nil {
		fmt.Fprintln(w, "interrupted: the history recorded so far was kept and checked")
	}
	if r.Error != "" {
		fmt.Fprintf(w, "run error: %s; the history recorded so far was kept and checked\n", r.Error)
	}
	if s := r.Run; s != nil {
		fmt.Fprintf(w, "workload: %s, %d operations (%.0f/s), %d acquisitions (%.1f/s), acquire p50 %s p99 %s, %d unknown outcomes\n",
			s.Workload.Round(10*time.Millisecond), s.Stats.Operations, s.OpsPerSecond, s.Stats.Acquisitions, s.AcquirePerSec,
			s.Stats.AcquireP50.Round(100*time.Microsecond), s.Stats.AcquireP99.Round(100*time.Microsecond), s.Stats.Unknown)
		switch n := s.Nemesis; {
		case n == nil:
		case n.HealError != "":
			fmt.Fprintf(w, "nemesis: %d faults; the final heal failed after %s: %s\n", len(n.Faults), n.Heal.Round(time.Millisecond), n.HealError)
		default:
			fmt.Fprintf(w, "nemesis: %d faults, all healed in %s\n", len(n.Faults), n.Heal.Round(time.Millisecond))
		}
		fmt.Fprintf(w, "cluster closed in %s\n", s.ClusterClose.Round(time.Millisecond))
	}
	fmt.Fprintln(w, "checks:")
	printChecks(w, r)
	for _, line := range reading(r) {
		fmt.Fprintln(w, line)
	}
	dir := filepath.Dir(r.History)
	fmt.Fprintf(w, "files: %s/ (history.jsonl, results.json, mutex.html, resource.html, resource-log.jsonl, schedule.json, logs/)\n", relPath(dir))
}

// reading says in words what the checks mean together: how often the lock's
// own mutual exclusion broke, and whether the resource kept the data safe.
func reading(r *harness.Results) []string {
	var lines []string
	get := func(name string) *checker.Result {
		for i := range r.Checks {
			if r.Checks[i].Name == name {
				return &r.Checks[i]
			}
		}
		return nil
	}
	if m := get(histories.CheckMutex); m != nil && m.Verdict == checker.Invalid {
		what := "the lock's own mutual exclusion broke"
		switch n := r.MutexOverlaps; {
		case n == 1:
			what = "the lock's own mutual exclusion broke: once two clients believed they held it at once"
		case n > 1:
			what = fmt.Sprintf("the lock's own mutual exclusion broke: %d times two clients believed they held it at once", n)
		}
		lines = append(lines, "in words: "+what+mutexClasses(r, get(histories.CheckContract))+".")
	}
	if c := get(histories.CheckContract); c != nil {
		lines = append(lines, contractWords(r, c))
	}
	if res := get(histories.CheckResource); res != nil {
		const notFencing = "this recipe's token is not a fencing token (it is taken after the grant, not with it), so no resource can rely on it"
		inv := get(histories.CheckInvariant)
		switch {
		case res.Verdict == checker.Valid && inv != nil && inv.Verdict == checker.Invalid:
			// The resource did what its check demands, and the data is
			// damaged all the same: the tokens themselves were unsound.
			line := "in words: the data was damaged although the resource kept to its fencing check (see invariant)"
			if c := get(histories.CheckContract); c != nil && slices.ContainsFunc(c.Violations, func(v checker.Violation) bool { return v.Kind == "promise 1" }) {
				line += ": the lock handed the same token to two holders (its tokens went back, promise 1), and no fencing check can tell their writes apart"
			}
			lines = append(lines, line+".")
		case r.NoFencingToken && res.Verdict == checker.Invalid:
			lines = append(lines, "in words: the resource was damaged: it accepted a write from a client that no longer held the lock; "+notFencing+": a user of this lock cannot fence.")
		case r.NoFencingToken && res.Verdict == checker.Valid:
			lines = append(lines, "in words: the resource stayed safe in this run, though not thanks to fencing: "+notFencing+".")
		case res.Verdict == checker.Valid && r.WritesRejected > 0:
			lines = append(lines, fmt.Sprintf("in words: fencing kept the resource safe: it rejected %s.", words.Plural(r.WritesRejected, "stale write")))
		case res.Verdict == checker.Valid:
			lines = append(lines, "in words: the resource stayed safe.")
		case res.Verdict == checker.Invalid:
			lines = append(lines, "in words: the resource was damaged: it accepted a write from a client that no longer held the lock. Fencing tokens checked by the resource prevent this.")
		}
	}
	return lines
}

// mutexClasses says, after "the lock's own mutual exclusion broke", what
// the overlaps were: the lease's words (Terms.Unsafe) only for the
// overlaps that began after the earlier holder's claim was gone, never for
// one that began while it stood.
func mutexClasses(r *harness.Results, c *checker.Result) string {
	if c == nil || c.LeaseRaces+c.LockBugs+c.Undecided == 0 {
		return "; whether each overlap was " + r.Terms.Race + " or the lock's bug was not judged"
	}
	if c.LockBugs == 0 && c.Undecided == 0 {
		return "; " + r.Terms.Unsafe
	}
	var parts []string
	if c.LockBugs > 0 {
		parts = append(parts, fmt.Sprintf("%d the lock's bug (the earlier holder's claim was still on the server when the later grant was decided, or another's release deleted it)", c.LockBugs))
	}
	if c.LeaseRaces > 0 {
		parts = append(parts, fmt.Sprintf("%d %s", c.LeaseRaces, r.Terms.Race))
	}
	if c.Undecided > 0 {
		parts = append(parts, fmt.Sprintf("%d not told apart (see contract)", c.Undecided))
	}
	return "; of the overlaps the contract judged, " + strings.Join(parts, ", ")
}

// contractWords says whether the lock itself is broken, and how many
// overlaps of holders were the lease race and how many bugs in the lock.
func contractWords(r *harness.Results, c *checker.Result) string {
	race := r.Terms.Race
	if r.NoFencingToken {
		race = strings.TrimSuffix(race, ")") + ", which this recipe's token cannot give)"
	}
	var overlaps string
	switch {
	case c.LeaseRaces+c.LockBugs > 0 && c.Undecided > 0:
		overlaps = fmt.Sprintf("of the overlapping holders, %d were %s, %d were bugs in the lock and %d could not be told apart", c.LeaseRaces, race, c.LockBugs, c.Undecided)
	case c.LeaseRaces+c.LockBugs > 0:
		overlaps = fmt.Sprintf("of the overlapping holders, %d were %s and %d were bugs in the lock", c.LeaseRaces, race, c.LockBugs)
	case r.MutexOverlaps > 0:
		// Promise 3 unjudged (a server without revisions cannot order a
		// grant against its deletions): the overlaps stay untold apart.
		overlaps = fmt.Sprintf("%s of holders, not told apart into %s and bugs in the lock", words.Plural(r.MutexOverlaps, "overlap"), race)
	default:
		overlaps = "no two clients held it at once"
	}
	switch c.Verdict {
	case checker.Invalid:
		var broke []string
		for _, v := range c.Violations {
			if !slices.Contains(broke, v.Kind) {
				broke = append(broke, v.Kind)
			}
		}
		return fmt.Sprintf("in words: the lock itself is broken (%s): %s.", strings.Join(broke, ", "), overlaps)
	case checker.Valid:
		return "in words: the lock kept its contract; " + overlaps + "."
	}
	if len(c.Unjudged) == 0 {
		// Nothing to judge it on: no grant at all.
		return "in words: the lock's contract could not be judged: it granted nothing."
	}
	return fmt.Sprintf("in words: the lock's contract could not be judged in full (promise %s); %s.", strings.Join(c.Unjudged, ", promise "), overlaps)
}

func relPath(p string) string {
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(rel, "..") {
			return rel
		}
	}
	return p
}

// isTerminal says whether f is a terminal (a character device).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
