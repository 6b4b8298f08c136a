package harness

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/words"
	"github.com/locktest/locktest/nemesis"
)

// ParseRequire turns "mutex,resource" or "all" into check names
// (checker.Names). Every check is always in the results; one that had
// nothing to judge is unknown, so requiring it makes the exit status 2.
func ParseRequire(s string) ([]string, error) {
	return expandRequire(strings.Split(s, ","))
}

// expandRequire turns "all" into every check's name and refuses a name that
// is no check's, so that a Go caller's Required means what the CLI's does.
func expandRequire(names []string) ([]string, error) {
	var out []string
	for _, name := range names {
		name = strings.TrimSpace(name)
		switch {
		case name == "all":
			out = append(out, checker.Names()...)
		case name == RequireData:
			out = append(out, name)
		case slices.Contains(checker.Names(), name):
			out = append(out, name)
		default:
			return nil, fmt.Errorf("--require: unknown check %q%s (want %s, %s or all)", name, words.DidYouMean(name, append(checker.Names(), "all", RequireData)), strings.Join(checker.Names(), ", "), RequireData)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// RequireData, the default of --require, requires the data checks that
// could judge: resource always (its unknown leaves the run unknown, as
// before), and invariant unless it is unknown. So damaged data decides the
// exit status whatever the lock tells: a lock without a fencing token
// leaves resource unknown, yet a lost update (invariant invalid) makes the
// run invalid; an invariant that cannot judge (writes of unknown outcome
// that could hide a loss) leaves the verdict to resource.
const RequireData = "data"

// dataJudged resolves RequireData in required into the checks it requires
// of these results.
func dataJudged(checks []checker.Result, required []string) []string {
	if !slices.Contains(required, RequireData) {
		return required
	}
	out := slices.DeleteFunc(slices.Clone(required), func(n string) bool { return n == RequireData })
	out = append(out, histories.CheckResource)
	for _, c := range checks {
		if c.Name == histories.CheckInvariant && c.Verdict != checker.Unknown {
			out = append(out, c.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Results is what results.json holds.
type Results struct {
	Seed *int64 `json:"seed,omitempty"`
	// Config is the run's Options (as stored JSON when re-checked).
	Config      any               `json:"config,omitempty"`
	Versions    map[string]string `json:"versions"`
	History     string            `json:"history"`
	Interrupted bool              `json:"interrupted,omitempty"`
	// CutShort says where the history stops short of its run's end (a run
	// killed or interrupted), and what it lacks; absent for a history that
	// ends as its run did, or that does not say (older and hand-written
	// histories). The checks the cut could hide are unknown, and the exit
	// status is 2 unless a violation was found.
	CutShort *checker.Cut `json:"cut_short,omitempty"`
	// Command is the command line that reproduces the run, as the CLI
	// recorded it, for people; Args are its words after "locktest", each as
	// the program receives it, for programs (shrink replays them). Runs
	// recorded before Args have Command only, its words quoted as a shell
	// reads them.
	Command string   `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	// Error is what went wrong in a run that failed part way; what it
	// recorded was checked all the same.
	Error string `json:"error,omitempty"`
	// Warnings are problems that did not stop the check, e.g. a last line
	// cut off by a killed run ("file:line: ...").
	Warnings []string `json:"warnings,omitempty"`
	// Scenario is the catalog scenario the run played, with whether its
	// verdicts were the ones it expects.
	Scenario *Scenario `json:"scenario,omitempty"`
	// Shrunk says, for a replay of a shrunk schedule, what it was shrunk
	// from and what was removed.
	Shrunk *Shrunk          `json:"shrunk,omitempty"`
	Run    *RunStats        `json:"run,omitempty"`
	Checks []checker.Result `json:"checks"`
	// Hashes are the members' hashes of their final key-value state, for
	// the consistency check; absent if the run did not collect them.
	Hashes []checker.MemberHash `json:"member_hashes,omitempty"`
	// Backend is the system under test the history was recorded on
	// ("etcd"; the default backend for a history that names none).
	Backend string `json:"backend"`
	// Terms are its words, for the summaries and the report.
	Terms checker.Terms `json:"-"`
	// NoFencingToken is set when the recipe's token is not a fencing token
	// (lock.Builtin.NoFencingToken): no resource can fence with it, which
	// the resource check's explanation says.
	NoFencingToken bool `json:"no_fencing_token,omitempty"`
	// MutexOverlaps counts the pairs of processes that believed they held a
	// lock at once: how often the lock's own mutual exclusion broke.
	MutexOverlaps int `json:"mutex_overlaps"`
	// WritesRejected counts writes the resource refused for a stale token.
	WritesRejected int             `json:"writes_rejected"`
	CheckTime      time.Duration   `json:"check_ns"`
	Required       []string        `json:"required"`
	Verdict        checker.Verdict `json:"verdict"`
	Exit           int             `json:"exit"`

	// paired is the history the checks judged, for the report to draw.
	paired *checker.History
}

// Paired returns the history the checks judged, paired once and shared
// (the report draws it); nil in results read from a file.
func (r *Results) Paired() *checker.History { return r.paired }

// verdict combines the required checks: any invalid makes the whole invalid;
// otherwise any unknown makes it unknown.
func verdict(checks []checker.Result, required []string) (checker.Verdict, int) {
	v, code := checker.Valid, ExitValid
	for _, r := range checks {
		if !slices.Contains(required, r.Name) {
			continue
		}
		switch r.Verdict {
		case checker.Invalid:
			return checker.Invalid, ExitInvalid
		case checker.Unknown:
			v, code = checker.Unknown, ExitUnknown
		}
	}
	return v, code
}

// DefaultLivenessBound is how soon after the final heal every client that
// asks for a lock must get it: the operation timeout (5 s), by which an
// acquire cut off by a fault has given up, plus time for a retry.
const DefaultLivenessBound = 7 * time.Second

// DefaultQuiet is how long the clients go on after the final heal, by
// default: longer than DefaultLivenessBound, so that a lock that stops
// granting after the heal is caught, not left unjudged.
const DefaultQuiet = 8 * time.Second

// CheckOptions tune Check.
type CheckOptions struct {
	// Backends give a history's backend its words and its recipe its
	// facts: registry.Backends(), as Options.Backends. Required.
	Backends *backend.Set
	// VisualizationDir receives porcupine's HTML for each check ("" = none).
	VisualizationDir string
	// Timeout limits each check; one that hits it is unknown (0 = none).
	Timeout time.Duration
	// Required are the checks whose failure decides the verdict.
	Required []string
	// LivenessBound is how soon after the final heal every client asking
	// for a lock must get it (default DefaultLivenessBound).
	LivenessBound time.Duration
	// Progress, if set, receives a self-overwriting status line on long
	// checks (meant for a terminal).
	Progress io.Writer
	// Hashes are the members' hashes of their final state, taken at the
	// run's end, for the consistency check; nil: none (a history file
	// holds none).
	Hashes []checker.MemberHash

	// planned are what a planned run knows of its backend and recipe,
	// which Check learns from Backends for a stored history; nil for
	// one.
	planned *checkFacts
}

// checkFacts are what the checks' results say of a history's backend and
// recipe: the backend's name and words, and whether the recipe's token is
// no fencing token.
type checkFacts struct {
	backend   string
	terms     checker.Terms
	noFencing bool
}

// factsOf are the facts of a stored history of backend name (the
// default backend's when it names none) and recipe, from backends.
func factsOf(backends *backend.Set, name, recipe string) *checkFacts {
	if name == "" {
		name = backends.Default().Name
	}
	return &checkFacts{backend: name, terms: backends.Terms(name), noFencing: backends.NoFencingToken(recipe)}
}

// Check reads a history in one pass into the checker's compact form (the
// records themselves are not kept) and runs every check on it.
func Check(path string, o CheckOptions) (*Results, error) {
	if o.Backends == nil {
		return nil, errNoBackends
	}
	if o.LivenessBound <= 0 {
		o.LivenessBound = DefaultLivenessBound
	}
	if o.planned == nil {
		// A planned run's are expanded already.
		required, err := expandRequire(o.Required)
		if err != nil {
			return nil, err
		}
		o.Required = required
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p := newProgress(o.Progress)
	r := histories.NewReader(f, path)
	r.Reuse() // the Builder copies out what it keeps
	b := checker.NewBuilder()
	b.Describe = nemesis.Describe
	b.Terms = o.Backends.Terms
	for n := 1; ; n++ {
		op, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			p.done()
			return nil, err
		}
		if err := b.AddPaired(op, r.Completes()); err != nil {
			// The Reader checks pairing, so this is not expected; say
			// where anyway.
			p.done()
			return nil, fmt.Errorf("%s: record %d: %w", path, n, err)
		}
		if n%4096 == 0 {
			p.report("reading %s: %d records", filepath.Base(path), n)
		}
	}
	h := b.Finish()
	// The paired history lives through every check, and porcupine's
	// segments make garbage as they go: collecting at half the live heap,
	// not a whole one, keeps the peak near the history's size. (Reading
	// makes little garbage.)
	defer debug.SetGCPercent(debug.SetGCPercent(50))
	var warnings []string
	if err := markApplied(h, filepath.Join(filepath.Dir(path), resourceLogName)); err != nil {
		warnings = append(warnings, err.Error())
	}
	began := time.Now()
	opt := checker.Options{Timeout: o.Timeout, LivenessBound: o.LivenessBound}
	if o.Progress != nil {
		opt.Progress = func(name string, done, total int) {
			p.report("checking %s: %d of %d segments", name, done, total)
		}
	}
	checks := checker.Judge(checker.Input{History: h, Hashes: o.Hashes, Options: opt})
	if o.VisualizationDir != "" {
		var wg sync.WaitGroup
		for i := range checks {
			wg.Go(func() { visualize(&checks[i], o.VisualizationDir) })
		}
		wg.Wait()
	}
	for i := range checks {
		checks[i].Visual = nil // drawn or not wanted: let it go
	}
	cut := h.JudgeCut(checks, o.LivenessBound)
	p.done()
	facts := o.planned
	if facts == nil {
		facts = factsOf(o.Backends, h.Backend(), h.Recipe())
	}
	if facts.noFencing {
		for i, c := range checks {
			if c.Name == histories.CheckResource {
				checks[i].Explanation = strings.TrimPrefix(c.Explanation+"\n"+notFencing(h.Recipe()), "\n")
			}
		}
	}
	res := &Results{
		Backend:        facts.backend,
		Terms:          facts.terms,
		NoFencingToken: facts.noFencing,
		Versions:       versions(o.Backends),
		History:        path,
		Checks:         checks,
		CheckTime:      time.Since(began),
		Required:       dataJudged(checks, o.Required),
		WritesRejected: h.WritesRejected(),
		MutexOverlaps:  len(h.Overlaps().Overlaps),
		Warnings:       warnings,
		CutShort:       cut,
		paired:         h,
	}
	if len(o.Hashes) > 0 {
		res.Hashes = o.Hashes
	}
	if t := r.Torn(); t != nil {
		res.Warnings = append(res.Warnings, t.Error())
	}
	res.Verdict, res.Exit = verdict(checks, res.Required)
	if cut != nil && res.Exit == ExitValid {
		res.Verdict, res.Exit = checker.Unknown, ExitUnknown
	}
	return res, nil
}

// notFencing says plainly that recipe's token is not a fencing token.
func notFencing(recipe string) string {
	return fmt.Sprintf("The token of recipe %s is not a fencing token: it is taken after the grant, not with it, so tokens need not grow in the order of the grants, and a resource that checks them cannot keep a holder whose lock expired from writing. A user of this lock cannot fence.", recipe)
}

// visualize writes a check's visualization, if it has one, to dir as
// NAME.html, and notes where, or why it could not, in the result.
func visualize(c *checker.Result, dir string) {
	if c.Visual == nil {
		return
	}
	path := filepath.Join(dir, c.Name+".html")
	if err := writeVisualization(c.Visual, path); err != nil {
		c.Explanation = strings.TrimPrefix(c.Explanation+"\nWriting the visualization failed: "+err.Error()+".", "\n")
		return
	}
	c.Visualization = path
}

func writeVisualization(v *checker.Visualization, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := v.Write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// progress writes a self-overwriting status line at most every 200 ms.
type progress struct {
	w    io.Writer
	last time.Time
	wide int
}

func newProgress(w io.Writer) *progress { return &progress{w: w, last: time.Now()} }

func (p *progress) report(format string, args ...any) {
	if p.w == nil || time.Since(p.last) < 200*time.Millisecond {
		return
	}
	p.last = time.Now()
	line := fmt.Sprintf(format, args...)
	fmt.Fprintf(p.w, "\r%-*s", p.wide, line)
	p.wide = max(p.wide, len(line))
}

// done clears the status line.
func (p *progress) done() {
	if p.w != nil && p.wide > 0 {
		fmt.Fprintf(p.w, "\r%*s\r", p.wide, "")
		p.wide = 0
	}
}

// WriteFile stores the results as indented JSON.
func (r *Results) WriteFile(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
