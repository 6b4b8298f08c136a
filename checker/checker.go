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
// Both checks are partitioned by key. Operations with unknown outcomes are
// modelled as possibly taking effect at any time after their invocation, or
// never; see mutex.go and resource.go for how each check models them.
package checker

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
	Name    string  `json:"name"` // "mutex" | "resource"
	Verdict Verdict `json:"verdict"`
	// Ops counts the operations (invocations with their completions) the
	// check covers, including those that cannot constrain it.
	Ops  int `json:"ops"`
	Keys int `json:"keys"`
	// Unknown counts covered operations whose outcome is unknown: info, no
	// completion, and (mutex) failed releases.
	Unknown  int           `json:"unknown"`
	Duration time.Duration `json:"duration_ns"`
	// Explanation says, for an invalid or unknown verdict, what went wrong,
	// in a few plain sentences, one per line.
	Explanation string `json:"explanation,omitempty"`
	// Visualization is the path of the HTML visualization written, if any.
	Visualization string `json:"visualization,omitempty"`
}

// Options tune the checks.
type Options struct {
	// Timeout bounds each check; 0 means no limit. A check that hits it is
	// Unknown.
	Timeout time.Duration
	// VisualizationDir, if set, receives porcupine's visualization of each
	// check, as NAME.html.
	VisualizationDir string
}

// Mutex checks that the lock behaves as a linearizable mutex with increasing
// fencing tokens.
func Mutex(ops []histories.Op, opt Options) Result { return run("mutex", mutexSpec, ops, opt) }

// Resource checks that the protected resource behaves as a linearizable
// fenced register.
func Resource(ops []histories.Op, opt Options) Result {
	return run("resource", resourceSpec, ops, opt)
}

// All runs every check: mutex, then resource.
func All(ops []histories.Op, opt Options) []Result {
	h, err := pair(ops)
	return []Result{
		h.check("mutex", mutexSpec, err, opt),
		h.check("resource", resourceSpec, err, opt),
	}
}

func run(name string, build func(*history) spec, ops []histories.Op, opt Options) Result {
	h, err := pair(ops)
	return h.check(name, build, err, opt)
}

// operation is a client invocation together with its completion.
type operation struct {
	process histories.Process
	f, key  string
	// status is OK, Fail or Info; Info also when the completion is missing.
	status       histories.Type
	invoke, done histories.Op // done is the zero Op if the completion is missing
	missing      bool
	call, ret    int64 // ret is the history's end if the completion is missing
}

func (o *operation) unknown() bool { return o.status == histories.Info }

// token is the fencing token of the operation: from the completion of an
// acquire, from the invocation (else the completion) of a write.
func (o *operation) token() (int64, bool) {
	if t, ok := o.invoke.Token(); ok {
		return t, true
	}
	return o.done.Token()
}

// value is the value written (from the invocation) or read (completion).
func (o *operation) value() (int64, bool) {
	if v, ok := o.invoke.Val(); ok && o.f == histories.Write {
		return v, true
	}
	return o.done.Val()
}

// history is a paired history.
type history struct {
	ops     []*operation // client operations, in invocation order
	nemesis []histories.Op
	// alive is, per process, the last time the process was seen acting: its
	// last invocation or definite completion.
	alive map[histories.Process]int64
	// end is later than every event. Operations that may take effect at any
	// time after their invocation return at end: porcupine has no notion of
	// an operation that never returns, and one returning after every other
	// event is the same thing.
	end int64
}

// pair matches invocations with completions: a completion belongs to the
// process's operation in flight. Invocations left open count as info.
func pair(ops []histories.Op) (*history, error) {
	h := &history{alive: map[histories.Process]int64{}}
	inflight := map[histories.Process]*operation{}
	for _, op := range ops {
		if op.Time < math.MaxInt64 {
			h.end = max(h.end, op.Time+1)
		}
		if op.Process == histories.Nemesis {
			h.nemesis = append(h.nemesis, op)
			continue
		}
		o := inflight[op.Process]
		if op.Type == histories.Invoke {
			if o != nil {
				return h, fmt.Errorf("op %d: process %d invokes %s while %s (op %d) is in flight",
					op.Index, op.Process, op.F, o.f, o.invoke.Index)
			}
			o = &operation{process: op.Process, f: op.F, key: op.Key, invoke: op, call: op.Time}
			inflight[op.Process] = o
			h.ops = append(h.ops, o)
			h.alive[op.Process] = max(h.alive[op.Process], op.Time)
			continue
		}
		if o == nil || o.f != op.F {
			return h, fmt.Errorf("op %d: %s %s of process %d does not complete an invocation", op.Index, op.Type, op.F, op.Process)
		}
		delete(inflight, op.Process)
		o.status, o.done, o.ret = op.Type, op, op.Time
		if op.Type != histories.Info {
			h.alive[op.Process] = max(h.alive[op.Process], op.Time)
		}
	}
	for _, o := range inflight {
		o.status, o.missing, o.ret = histories.Info, true, h.end
	}
	return h, nil
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
	// scan looks for a simple, direct proof of a violation, and describes it;
	// "" if it finds none.
	scan func() string
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
	s := fmt.Sprintf("history index %d → %d (%s)", o.invoke.Index, o.done.Index, o.status)
	if o.missing {
		s = fmt.Sprintf("history index %d, no completion", o.invoke.Index)
	}
	if o.done.Error != "" {
		s += ": " + o.done.Error
	}
	return s
}

func (h *history) check(name string, build func(*history) spec, pairErr error, opt Options) Result {
	began := time.Now()
	res := Result{Name: name, Verdict: Unknown}
	if pairErr != nil {
		res.Explanation = "The history is malformed: " + pairErr.Error() + "."
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

	kind, info := porcupine.CheckOperationsVerbose(s.model, s.ops, opt.Timeout)
	switch kind {
	case porcupine.Ok:
		res.Verdict = Valid
	case porcupine.Illegal:
		res.Verdict = Invalid
		res.Explanation = joinLines(s.scan(), explainIllegal(s.model, s.ops, info))
	default:
		res.Explanation = fmt.Sprintf("Porcupine found no linearization and no violation within %v.", opt.Timeout)
		if found := s.scan(); found != "" {
			res.Explanation = joinLines(res.Explanation, "Yet a direct scan found a violation: "+found)
		}
	}
	res.Duration = time.Since(began)

	if opt.VisualizationDir != "" {
		path, err := h.visualize(name, s, info, opt.VisualizationDir)
		if err != nil {
			res.Explanation = joinLines(res.Explanation, "Writing the visualization failed: "+err.Error()+".")
		} else {
			res.Visualization = path
		}
	}
	return res
}

func joinLines(parts ...string) string {
	return strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), "\n")
}

// explainIllegal describes, for each key whose operations porcupine could not
// linearize, where the longest linearization it found got stuck.
func explainIllegal(model porcupine.Model, ops []porcupine.Operation, info porcupine.LinearizationInfo) string {
	parts := byKey(ops)
	partials := info.PartialLinearizationsOperations()
	var out []string
	for i, part := range parts {
		if i >= len(partials) {
			break
		}
		best := longest(partials[i])
		if len(best) == len(part) {
			continue
		}
		if len(out) == 3 {
			out = append(out, "(Other keys fail too.)")
			break
		}
		out = append(out, explainPartition(model, part, best))
	}
	return joinLines(out...)
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

// explainPartition explains why the longest linearization of one key's
// operations cannot be extended: after it, none of the operations that could
// come next (those invoked before the earliest return among the rest) can
// take effect.
func explainPartition(model porcupine.Model, part, best []porcupine.Operation) string {
	state := model.Init()
	done := map[*call]bool{}
	for _, op := range best {
		_, state = model.Step(state, op.Input, op.Output)
		done[op.Input.(*call)] = true
	}
	var rest []porcupine.Operation
	for _, op := range part {
		if !done[op.Input.(*call)] {
			rest = append(rest, op)
		}
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
			others = append(others, describeTimed(model, op))
		}
	}
	key := part[0].Input.(*call).key
	s := fmt.Sprintf("On key %q porcupine linearizes at most %d of %d operations. ", key, len(best), len(part))
	if len(best) > 0 {
		s += fmt.Sprintf("After %s, with %s", describeTimed(model, best[len(best)-1]), model.DescribeState(state))
	} else {
		s += "In the initial state, with " + model.DescribeState(state)
	}
	s += fmt.Sprintf(", no operation can come next: %s must take effect by %s but cannot", describeTimed(model, first), seconds(first.Return))
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
func describeTimed(model porcupine.Model, op porcupine.Operation) string {
	c := op.Input.(*call)
	d := model.DescribeOperation(op.Input, op.Output)
	switch {
	case c.implicit:
		return fmt.Sprintf("%s (after %s)", d, seconds(op.Call))
	case c.unknown:
		return fmt.Sprintf("%s (invoked %s)", d, seconds(op.Call))
	}
	return fmt.Sprintf("%s (invoked %s, returned %s)", d, seconds(op.Call), seconds(op.Return))
}

// seconds formats a history time.
func seconds(ns int64) string { return fmt.Sprintf("%.3f s", float64(ns)/1e9) }

// visualize writes porcupine's visualization, with nemesis events and the
// operations left out of the model as annotations.
func (h *history) visualize(name string, s spec, info porcupine.LinearizationInfo, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var notes []porcupine.Annotation
	for _, o := range s.ignored {
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
	open := map[string]histories.Op{} // nemesis invocations by f
	for _, op := range h.nemesis {
		if op.Type == histories.Invoke {
			open[op.F] = op
			continue
		}
		start := op
		if inv, ok := open[op.F]; ok {
			start = inv
			delete(open, op.F)
		}
		notes = append(notes, nemesisNote(start, op.Time))
	}
	for _, op := range open {
		notes = append(notes, nemesisNote(op, h.end))
	}
	info.AddAnnotations(notes)
	path := filepath.Join(dir, name+".html")
	return path, porcupine.VisualizePath(s.model, info, path)
}

func nemesisNote(op histories.Op, end int64) porcupine.Annotation {
	desc := op.F
	details := fmt.Sprintf("history index %d", op.Index)
	if v := op.Value; v != nil {
		if len(v.Targets) > 0 {
			desc += " " + strings.Join(v.Targets, ",")
		}
		if v.Fault != "" {
			details += fmt.Sprintf(", fault %q", v.Fault)
		}
		if len(v.Params) > 0 {
			details += fmt.Sprintf(", params %v", v.Params)
		}
	}
	return porcupine.Annotation{Tag: "nemesis", Start: op.Time, End: end, Description: desc, Details: details}
}
