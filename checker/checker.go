// Package checker decides whether a locktest history is correct, using
// porcupine to search for linearizations against sequential models.
//
// Two checks run on the same history:
//
//   - mutex: the acquire and release operations of each key behave like a
//     linearizable mutual-exclusion lock whose fencing tokens grow with each
//     grant;
//   - resource: the read and write operations of each key behave like a
//     linearizable fenced register, which accepts a write only if its token is
//     at least the highest it has accepted.
//
// Both checks are partitioned by key, and each key's operations further into
// segments that porcupine checks independently (P-compositionality in time
// and in token order; see segment.go), which keeps long histories linear in
// time and memory. Porcupine still decides every segment. Operations with
// unknown outcomes are modelled as possibly taking effect at any time after
// their invocation, or never; see mutex.go and resource.go for how each
// check models them.
//
// Beside porcupine: an overlap analysis of who believed they held each lock
// when (Overlaps), stories of each violation in plain words (Violation),
// liveness after the final heal (Liveness) and agreement of the members'
// final state (Consistency).
package checker

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

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
	LeaseRaces int      `json:"lease_races,omitempty"`
	LockBugs   int      `json:"lock_bugs,omitempty"`
	Unjudged   []string `json:"unjudged,omitempty"`
	// Visualization is the path of the HTML visualization written, if any.
	Visualization string `json:"visualization,omitempty"`
}

// Options tune the checks.
type Options struct {
	// Timeout bounds each check; 0 means no limit. A check that hits it is
	// Unknown, unless it found a violation in what it checked.
	Timeout time.Duration
	// VisualizationDir, if set, receives porcupine's visualization of each
	// check, as NAME.html.
	VisualizationDir string
	// SegmentOps is the number of operations a segment collects before it
	// is cut at the next sound point; 0 means DefaultSegmentOps.
	SegmentOps int
	// VisualizationOps caps the operations drawn in a visualization (the
	// failing segments first); 0 means DefaultVisualizationOps.
	VisualizationOps int
	// Progress, if set, is called after each segment porcupine finishes,
	// with the check's name, the segments finished and their total. Calls
	// do not overlap.
	Progress func(check string, done, total int)
}

// DefaultVisualizationOps is the default cap on the operations drawn.
const DefaultVisualizationOps = 20000

// Mutex checks that the lock behaves as a linearizable mutex with increasing
// fencing tokens.
func Mutex(ops []histories.Op, opt Options) Result { return Build(ops).Mutex(opt) }

// Resource checks that the protected resource behaves as a linearizable
// fenced register.
func Resource(ops []histories.Op, opt Options) Result { return Build(ops).Resource(opt) }

// All runs the linearizability checks: mutex, then resource.
func All(ops []histories.Op, opt Options) []Result { return Build(ops).All(opt) }

// Mutex checks that the lock behaves as a linearizable mutex with increasing
// fencing tokens.
func (h *History) Mutex(opt Options) Result { return h.check(histories.CheckMutex, mutexSpec, opt) }

// Resource checks that the protected resource behaves as a linearizable
// fenced register.
func (h *History) Resource(opt Options) Result {
	return h.check(histories.CheckResource, resourceSpec, opt)
}

// All runs the linearizability checks: mutex, then resource.
func (h *History) All(opt Options) []Result {
	return []Result{h.Mutex(opt), h.Resource(opt)}
}

// spec is what a check hands to porcupine.
type spec struct {
	model porcupine.Model
	ops   []porcupine.Operation
	// covered are the operations of the check's f's, modelled or not.
	covered []*operation
	// ignored are covered operations left out of the model because they
	// cannot constrain it; the visualization shows them as annotations.
	ignored []*operation
	// cut cuts one key's operations into segments.
	cut func(key string, ops []porcupine.Operation, minOps int) []segment
	// scan looks for simple, direct proofs of violations, and tells their
	// stories.
	scan func() []Violation
}

// call is the input of a porcupine operation: everything the models need.
type call struct {
	key     string
	process histories.Process
	f       string
	// unknown: the operation may take effect at any time after its
	// invocation (it returns at the history's end, or as bound allows).
	unknown bool
	// implicit marks a release the history does not show: the lock of a
	// process that stopped while holding it is freed by its lease expiring.
	implicit bool
	token    int64
	hasToken bool
	value    int64
	op       *operation // nil if implicit
	// init is the state a segment's synthetic first operation sets (f is
	// fInit).
	init any
}

// add appends a modelled operation.
func (s *spec) add(c *call, callT, retT int64) {
	s.ops = append(s.ops, porcupine.Operation{
		ClientId: int(c.process),
		Input:    c,
		Call:     callT,
		Return:   retT,
		Metadata: c.op,
	})
}

// bound brings forward the return of unknown operations. An unknown operation
// u returns at the history's end; but if, whenever the history is
// linearizable, u can be linearized before a known operation q invoked after
// it (closes(u, q)), then u may as well return when q does. Verdicts do not
// change, and porcupine no longer carries u to the end of the history, which
// multiplies the states it explores when searching an invalid one.
func (s *spec) bound(closes func(u, q *call) bool) {
	var known []int // indices of known operations, by invocation time
	for i, op := range s.ops {
		if !op.Input.(*call).unknown {
			known = append(known, i)
		}
	}
	slices.SortStableFunc(known, func(a, b int) int { return cmp.Compare(s.ops[a].Call, s.ops[b].Call) })
	for i := range s.ops {
		u := &s.ops[i]
		uc := u.Input.(*call)
		if !uc.unknown {
			continue
		}
		first, _ := slices.BinarySearchFunc(known, u.Call, func(j int, t int64) int { return cmp.Compare(s.ops[j].Call, t) })
		for _, j := range known[first:] {
			q := &s.ops[j]
			if q.Call > u.Return {
				break // no later-invoked operation can return earlier
			}
			if closes(uc, q.Input.(*call)) {
				u.Return = min(u.Return, q.Return)
			}
		}
	}
}

// byKey is the models' partition function: a history is linearizable iff
// each key's is. Partitions are in key order.
func byKey(ops []porcupine.Operation) [][]porcupine.Operation {
	groups := map[string][]porcupine.Operation{}
	for _, op := range ops {
		k := op.Input.(*call).key
		groups[k] = append(groups[k], op)
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([][]porcupine.Operation, len(keys))
	for i, k := range keys {
		parts[i] = groups[k]
	}
	return parts
}

func describeMetadata(m any) string {
	o, ok := m.(*operation)
	if !ok || o == nil {
		return ""
	}
	s := fmt.Sprintf("history index %d → %d (%s)", o.inv, o.done, o.status)
	if o.missing {
		s = fmt.Sprintf("history index %d, no completion", o.inv)
	}
	if o.err != "" {
		s += ": " + o.err
	}
	return s
}

func (o Options) segmentOps() int {
	if o.SegmentOps > 0 {
		return o.SegmentOps
	}
	return DefaultSegmentOps
}

func (h *History) check(name string, build func(*History) spec, opt Options) Result {
	began := time.Now()
	res := Result{Name: name, Verdict: Unknown}
	if h.err != nil {
		res.Explanation = "The history is malformed: " + h.err.Error() + "."
		return res
	}
	s := build(h)
	keys := map[string]bool{}
	for _, o := range s.covered {
		keys[o.key] = true
		if o.unknown() || o.f == histories.Release && o.status == histories.Fail {
			res.Unknown++
		}
	}
	res.Ops, res.Keys = len(s.covered), len(keys)

	segs := segmentAll(s.ops, opt.segmentOps(), s.cut)
	res.Segments = len(segs)
	model := s.model
	model.Step = withInit(model.Step)
	model.Partition = nil
	var deadline time.Time
	if opt.Timeout > 0 {
		deadline = began.Add(opt.Timeout)
	}
	outcomes, checked := runSegments(name, model, segs, deadline, opt.Progress)
	res.Checked = checked
	var failing []int
	for i, r := range outcomes {
		if r == porcupine.Illegal {
			failing = append(failing, i)
		}
	}
	switch {
	case len(failing) > 0:
		res.Verdict = Invalid
		res.Violations = s.scan()
		var lines []string
		for _, v := range res.Violations {
			lines = append(lines, v.Story)
		}
		// The first failing segment of each key, for up to maxExplained
		// keys; later segments of a key may fail as a consequence.
		explained, more := map[string]bool{}, 0
		for _, i := range failing {
			if explained[segs[i].key] || len(explained) == maxExplained {
				more++
				continue
			}
			explained[segs[i].key] = true
			v := h.explainSegment(name, model, segs[i], remaining(deadline, opt.Timeout))
			res.Violations = append(res.Violations, v)
			lines = append(lines, v.Story)
		}
		if more > 0 {
			lines = append(lines, fmt.Sprintf("(Porcupine found %s failing segments besides; those after a key's first may fail as a consequence of it.)", strconv.Itoa(more)))
		}
		res.Explanation = joinLines(lines...)
	case checked == len(segs):
		res.Verdict = Valid
	default:
		ops, total := 0, 0
		for i, sg := range segs {
			total += len(sg.ops)
			if outcomes[i] == porcupine.Ok {
				ops += len(sg.ops)
			}
		}
		res.Explanation = fmt.Sprintf("Porcupine found no linearization and no violation within %v: it checked %d of %d segments (%d of %d modelled operations), and found no violation in those.",
			opt.Timeout, checked, len(segs), ops, total)
		if found := s.scan(); len(found) > 0 {
			res.Violations = found
			res.Explanation = joinLines(res.Explanation, "Yet a direct scan found a violation: "+found[0].Story)
		}
	}
	res.Duration = time.Since(began)

	if opt.VisualizationDir != "" {
		path, err := h.visualize(name, s, model, segs, failing, opt)
		if err != nil {
			res.Explanation = joinLines(res.Explanation, "Writing the visualization failed: "+err.Error()+".")
		} else {
			res.Visualization = path
		}
	}
	return res
}

// maxExplained is how many keys' failing segments an explanation details.
const maxExplained = 3

// remaining is the time left before deadline, but at least a tenth of the
// whole limit, for explanations and visualizations after a check; 0 (no
// limit) without a deadline.
func remaining(deadline time.Time, limit time.Duration) time.Duration {
	if deadline.IsZero() {
		return 0
	}
	return max(time.Until(deadline), limit/10, time.Millisecond)
}

// runSegments checks segments in parallel until the deadline (if any). It
// returns each segment's outcome ("" if not checked) and how many finished.
func runSegments(name string, model porcupine.Model, segs []segment, deadline time.Time, progress func(string, int, int)) ([]porcupine.CheckResult, int) {
	out := make([]porcupine.CheckResult, len(segs))
	var next atomic.Int64
	var mu sync.Mutex
	done := 0
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(segs)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(segs) {
					return
				}
				var limit time.Duration
				if !deadline.IsZero() {
					if limit = time.Until(deadline); limit <= 0 {
						return
					}
				}
				r := porcupine.CheckOperationsTimeout(model, segs[i].operations(), limit)
				out[i] = r
				if r == porcupine.Unknown {
					return
				}
				mu.Lock()
				done++
				if progress != nil {
					progress(name, done, len(segs))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out, done
}

func joinLines(parts ...string) string {
	return strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), "\n")
}

// explainSegment re-checks a failing segment verbosely and says where the
// longest linearization porcupine found got stuck, and which window of the
// history porcupine needed to decide.
func (h *History) explainSegment(name string, model porcupine.Model, seg segment, limit time.Duration) Violation {
	from, to, first, last := seg.span()
	w := &Window{Key: seg.key, From: from, To: to, FirstIndex: first, LastIndex: last, Ops: len(seg.ops)}
	v := Violation{Check: name, Kind: "not-linearizable", Key: seg.key, From: from, To: to, Window: w}
	seen := map[histories.Process]bool{}
	for _, op := range seg.ops {
		if c := op.Input.(*call); !seen[c.process] {
			seen[c.process] = true
			v.Processes = append(v.Processes, int(c.process))
		}
	}
	slices.Sort(v.Processes)
	v.Faults = h.faultsDuring(from, min(to, h.end))
	where := fmt.Sprintf("porcupine needed only history indices %d to %d (%s to %s, %s of key %q", first, last, h.at(from), h.at(min(to, h.end)), plural(len(seg.ops), "operation"), seg.key)
	if !seg.initial {
		where += ", starting from " + model.DescribeState(seg.init)
	}
	where += ")"
	ops := seg.operations()
	kind, info := porcupine.CheckOperationsVerbose(model, ops, limit)
	detail := ""
	if kind == porcupine.Illegal {
		if partials := info.PartialLinearizationsOperations(); len(partials) == 1 {
			detail = h.explainPartition(model, ops, longest(partials[0]))
		}
	}
	if detail == "" {
		detail = fmt.Sprintf("On key %q porcupine could not linearize these operations.", seg.key)
	}
	v.Story = strings.TrimSuffix(detail, ".") + "; " + where
	if len(v.Faults) > 0 {
		v.Story += "; faults active then: " + h.describeFaults(v.Faults)
	}
	v.Story += "."
	return v
}

// longest picks the longest partial linearization; ties go to the one whose
// operations were invoked first, so explanations are deterministic.
func longest(partials [][]porcupine.Operation) []porcupine.Operation {
	var best []porcupine.Operation
	for _, p := range partials {
		if c := cmp.Compare(len(p), len(best)); c > 0 || c == 0 && slices.CompareFunc(p, best, func(a, b porcupine.Operation) int {
			return cmp.Compare(a.Call, b.Call)
		}) < 0 {
			best = p
		}
	}
	return best
}

// explainPartition explains why the longest linearization of a segment's
// operations cannot be extended: after it, none of the operations that could
// come next (those invoked before the earliest return among the rest) can
// take effect.
func (h *History) explainPartition(model porcupine.Model, part, best []porcupine.Operation) string {
	state := model.Init()
	done := map[*call]bool{}
	real := 0 // operations of best that are not the synthetic first one
	for _, op := range best {
		_, state = model.Step(state, op.Input, op.Output)
		done[op.Input.(*call)] = true
		if op.Input.(*call).f != fInit {
			real++
		}
	}
	var rest []porcupine.Operation
	total := 0
	for _, op := range part {
		if op.Input.(*call).f != fInit {
			total++
		}
		if !done[op.Input.(*call)] {
			rest = append(rest, op)
		}
	}
	if len(rest) == 0 {
		return ""
	}
	first := slices.MinFunc(rest, func(a, b porcupine.Operation) int {
		return cmp.Or(cmp.Compare(a.Return, b.Return), cmp.Compare(a.Call, b.Call))
	})
	var others []string
	n := 0
	slices.SortStableFunc(rest, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	for _, op := range rest {
		if op.Call > first.Return || op.Input == first.Input {
			continue
		}
		if n++; n <= 3 {
			others = append(others, h.describeTimed(model, op))
		}
	}
	key := part[0].Input.(*call).key
	s := fmt.Sprintf("On key %q porcupine linearizes at most %d of %d operations. ", key, real, total)
	if n := len(best); n > 0 && best[n-1].Input.(*call).f != fInit {
		s += fmt.Sprintf("After %s, with %s", h.describeTimed(model, best[n-1]), model.DescribeState(state))
	} else {
		s += "From the start, with " + model.DescribeState(state)
	}
	s += fmt.Sprintf(", no operation can come next: %s must take effect by %s but cannot", h.describeTimed(model, first), h.at3(first.Return))
	switch {
	case n == 0:
	case n <= 3:
		s += fmt.Sprintf(", nor can the %s invoked by then (%s)", plural(n, "other"), strings.Join(others, "; "))
	default:
		s += fmt.Sprintf(", nor can the %s invoked by then (%s; …)", plural(n, "other"), strings.Join(others, "; "))
	}
	return s + "."
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// describeTimed describes an operation with its times.
func (h *History) describeTimed(model porcupine.Model, op porcupine.Operation) string {
	c := op.Input.(*call)
	d := model.DescribeOperation(op.Input, op.Output)
	switch {
	case c.implicit:
		return fmt.Sprintf("%s (after %s)", d, h.at3(op.Call))
	case c.unknown:
		return fmt.Sprintf("%s (invoked %s)", d, h.at3(op.Call))
	}
	return fmt.Sprintf("%s (invoked %s, returned %s)", d, h.at3(op.Call), h.at3(op.Return))
}

// origin is the time shown as 0 s: 0, unless the history's clock starts far
// from it (more than an hour in, as with Unix-epoch times in a hand-written
// history), in which case its first record.
func (h *History) origin() int64 {
	if h.start > int64(time.Hour) {
		return h.start
	}
	return 0
}

// at formats a history time in seconds, with two decimals.
func (h *History) at(ns int64) string {
	return fmt.Sprintf("%.2f s", float64(ns-h.origin())/1e9)
}

// at3 formats a history time in seconds, with three decimals.
func (h *History) at3(ns int64) string {
	return fmt.Sprintf("%.3f s", float64(ns-h.origin())/1e9)
}

// visualize writes porcupine's visualization of the failing segments and as
// many others as opt.VisualizationOps allows, with the nemesis's fault
// windows and the operations left out of the model as annotations.
func (h *History) visualize(name string, s spec, model porcupine.Model, segs []segment, failing []int, opt Options) (string, error) {
	if err := os.MkdirAll(opt.VisualizationDir, 0o755); err != nil {
		return "", err
	}
	budget := opt.VisualizationOps
	if budget <= 0 {
		budget = DefaultVisualizationOps
	}
	chosen := map[int]bool{}
	n := 0
	pick := func(i int) {
		if !chosen[i] && (n == 0 || n+len(segs[i].ops) <= budget) {
			chosen[i] = true
			n += len(segs[i].ops)
		}
	}
	for _, i := range failing {
		pick(i)
	}
	for i := range segs {
		if n >= budget {
			break
		}
		pick(i)
	}
	var parts [][]porcupine.Operation
	var all []porcupine.Operation
	var lo, hi int64 = math.MaxInt64, math.MinInt64
	for i := range segs {
		if chosen[i] {
			ops := segs[i].operations()
			parts = append(parts, ops)
			all = append(all, ops...)
			from, to, _, _ := segs[i].span()
			lo, hi = min(lo, from), max(hi, to)
		}
	}
	m := model
	m.Partition = func([]porcupine.Operation) [][]porcupine.Operation { return parts }
	var limit time.Duration
	if opt.Timeout > 0 {
		limit = max(opt.Timeout/10, time.Second)
	}
	_, info := porcupine.CheckOperationsVerbose(m, all, limit)

	var notes []porcupine.Annotation
	if len(chosen) < len(segs) {
		notes = append(notes, porcupine.Annotation{Tag: "locktest", Start: lo, End: lo,
			Description: fmt.Sprintf("%d of %d segments drawn", len(chosen), len(segs)),
			Details:     fmt.Sprintf("%s: the visualization shows %d of %d segments (failing ones first); see results.json for the rest", name, len(chosen), len(segs))})
	}
	for _, o := range s.ignored {
		if o.call > hi || o.ret < lo {
			continue
		}
		outcome := string(o.status)
		if o.missing {
			outcome = "without completion"
		}
		notes = append(notes, porcupine.Annotation{
			ClientId:        int(o.process),
			Start:           o.call,
			End:             o.ret,
			Description:     fmt.Sprintf("%s %s (not modelled)", o.f, outcome),
			Details:         "cannot constrain the check: " + describeMetadata(o),
			BackgroundColor: "#e8e8e8",
		})
	}
	for _, f := range h.faults() {
		if f.End < lo || f.Start > hi {
			continue
		}
		notes = append(notes, h.faultNote(f))
	}
	info.AddAnnotations(notes)
	path := filepath.Join(opt.VisualizationDir, name+".html")
	return path, porcupine.VisualizePath(m, info, path)
}
