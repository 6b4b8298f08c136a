// Package checker decides whether a locktest history is correct: it judges
// a history and says why, in plain words; writing files and wording faults
// are its callers' part.
//
// Two linearizability checks run on the same history, with porcupine
// searching for linearizations against sequential models:
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
// Beside porcupine: the application's invariant (Invariant), the lock's
// contract (Contract), liveness after the final heal (Liveness), agreement
// of the members' final state (Consistency) and an overlap analysis of who
// believed they held each lock when (Overlaps). Each verdict comes with
// stories of its violations in plain words.
//
// Where things are: history.go pairs records into a History, once, and
// events.go reads the nemesis and workload events into it as they come
// (view.go lets the report draw it); registry.go lists the checks and runs
// them; checker.go runs porcupine (mutex.go, resource.go: the models;
// segment.go: the cuts); invariant.go, contract.go, liveness.go and
// consistency.go are the other checks; cut.go judges what a history cut
// short can hide; result.go holds the result types; overlap.go is the
// overlap analysis; story.go and explain.go tell what went wrong;
// visualize.go draws porcupine's visualization.
package checker

import (
	"cmp"
	"fmt"
	"maps"
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

// Options tune the checks.
type Options struct {
	// Timeout bounds each check; 0 means no limit. A check that hits it is
	// Unknown, unless it found a violation in what it checked.
	Timeout time.Duration
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
	// LivenessBound is how soon, once every fault has ended, every client
	// that asks for a lock must get it (the liveness check).
	LivenessBound time.Duration
	// SegmentTimeout bounds porcupine on one segment; 0 means
	// DefaultSegmentTimeout. A segment it cannot decide in time leaves the
	// check unknown, unless another fails.
	SegmentTimeout time.Duration
}

// DefaultSegmentTimeout is the default bound on one segment. A segment of
// a real run takes porcupine a millisecond or so; one that takes a second
// is a search among many operations at once (a hand-written history's
// equal times, say) that may take far longer, so the check says it cannot
// decide rather than hang.
const DefaultSegmentTimeout = time.Second

func (o Options) segmentTimeout() time.Duration {
	if o.SegmentTimeout > 0 {
		return o.SegmentTimeout
	}
	return DefaultSegmentTimeout
}

// DefaultVisualizationOps is the default cap on the operations drawn.
const DefaultVisualizationOps = 20000

// Mutex checks that the lock behaves as a linearizable mutex with increasing
// fencing tokens.
func Mutex(ops []histories.Op, opt Options) Result { return Build(ops).Mutex(opt) }

// Resource checks that the protected resource behaves as a linearizable
// fenced register.
func Resource(ops []histories.Op, opt Options) Result { return Build(ops).Resource(opt) }

// Linearizable runs the linearizability checks on ops: mutex, then
// resource. Every check of the registry: Judge.
func Linearizable(ops []histories.Op, opt Options) []Result { return Build(ops).Linearizable(opt) }

// All is Linearizable under its old name, which said more than it does.
//
// Deprecated: use Linearizable, or Judge for every check. It stays only
// until backend/etcd's tests, which call it, are moved to Linearizable.
func All(ops []histories.Op, opt Options) []Result { return Linearizable(ops, opt) }

// Mutex checks that the lock behaves as a linearizable mutex with increasing
// fencing tokens.
func (h *History) Mutex(opt Options) Result { return h.check(histories.CheckMutex, mutexSpec, opt) }

// Resource checks that the protected resource behaves as a linearizable
// fenced register.
func (h *History) Resource(opt Options) Result {
	return h.check(histories.CheckResource, resourceSpec, opt)
}

// Linearizable runs the linearizability checks: mutex, then resource.
// Every check of the registry: Judge.
func (h *History) Linearizable(opt Options) []Result {
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
	// unjudged, if set, says why a history with no violation is not
	// valid either: what it cannot judge.
	unjudged string
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
	// unordered: the token is no fencing token (the setup event says so),
	// and the lock promises nothing of its order: only exclusion counts.
	unordered bool
	value     int64
	op        *operation // nil if implicit
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
	count := map[string]int{}
	for _, op := range ops {
		count[op.Input.(*call).key]++
	}
	if len(count) == 1 { // one lock: no copy
		return [][]porcupine.Operation{ops}
	}
	keys := slices.Sorted(maps.Keys(count))
	parts := make([][]porcupine.Operation, len(keys))
	at := map[string]int{}
	for i, k := range keys {
		parts[i] = make([]porcupine.Operation, 0, count[k])
		at[k] = i
	}
	for _, op := range ops {
		i := at[op.Input.(*call).key]
		parts[i] = append(parts[i], op)
	}
	return parts
}

// describer describes an operation for porcupine's visualization: where it
// is in the history, and the error its completion gave.
func (h *History) describer() func(m any) string {
	return func(m any) string {
		o, ok := m.(*operation)
		if !ok || o == nil {
			return ""
		}
		s := fmt.Sprintf("history index %d → %d (%s)", o.inv, o.done, o.status)
		if o.missing {
			s = fmt.Sprintf("history index %d, no completion", o.inv)
		}
		if err := h.errs[o]; err != "" {
			s += ": " + err
		}
		return s
	}
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
	if res.Ops == 0 {
		res.Explanation = fmt.Sprintf("The history has no %s operations: there is nothing to judge.", map[string]string{
			histories.CheckMutex: "acquire or release", histories.CheckResource: "read or write"}[name])
		res.Duration = time.Since(began)
		return res
	}

	segs := segmentAll(s.ops, opt.segmentOps(), s.cut)
	s.ops = nil // the segments hold what is checked
	res.Segments = len(segs)
	model := s.model
	model.Step = withInit(model.Step)
	model.DescribeOperationMetadata = h.describer()
	model.Partition = nil
	var deadline time.Time
	if opt.Timeout > 0 {
		deadline = began.Add(opt.Timeout)
	}
	outcomes, checked := runSegments(name, model, segs, deadline, opt.segmentTimeout(), opt.Progress)
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
		// keys; later segments of a key may fail as a consequence. The
		// explanations share one segment's time.
		explained, more := map[string]bool{}, 0
		explainBy := time.Now().Add(opt.segmentTimeout())
		for _, i := range failing {
			if explained[segs[i].key] || len(explained) == maxExplained {
				more++
				continue
			}
			explained[segs[i].key] = true
			limit := time.Until(explainBy)
			if !deadline.IsZero() {
				limit = min(limit, remaining(deadline, opt.Timeout))
			}
			v := h.explainSegment(name, model, segs[i], max(limit, 10*time.Millisecond))
			res.Violations = append(res.Violations, v)
			lines = append(lines, v.Story)
		}
		if more > 0 {
			lines = append(lines, fmt.Sprintf("(Porcupine found %s failing segments besides; those after a key's first may fail as a consequence of it.)", strconv.Itoa(more)))
		}
		res.Explanation = joinLines(lines...)
	case checked == len(segs) && s.unjudged != "":
		res.Explanation = s.unjudged
	case checked == len(segs):
		res.Verdict = Valid
	default:
		ops, total, undecided := 0, 0, 0
		for i, sg := range segs {
			total += len(sg.ops)
			switch outcomes[i] {
			case porcupine.Ok:
				ops += len(sg.ops)
			case porcupine.Unknown:
				undecided++
			}
		}
		within := fmt.Sprintf("within %v", opt.Timeout)
		if undecided > 0 && (deadline.IsZero() || time.Now().Before(deadline)) {
			within = fmt.Sprintf("within %v per segment (%d of them undecided)", opt.segmentTimeout(), undecided)
		}
		res.Explanation = fmt.Sprintf("Porcupine found no linearization and no violation %s: it checked %d of %d segments (%d of %d modelled operations), and found no violation in those.",
			within, checked, len(segs), ops, total)
		if found := s.scan(); len(found) > 0 {
			res.Violations = found
			res.Explanation = joinLines(res.Explanation, "Yet a direct scan found a violation: "+found[0].Story)
		}
	}
	res.Duration = time.Since(began)

	res.Visual = h.visualization(name, s, model, segs, failing, opt)
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

// runSegments checks segments in parallel until the deadline (if any), each
// for at most perSegment. It returns each segment's outcome ("" if not
// checked, Unknown if not decided in time) and how many were decided.
func runSegments(name string, model porcupine.Model, segs []segment, deadline time.Time, perSegment time.Duration, progress func(string, int, int)) ([]porcupine.CheckResult, int) {
	out := make([]porcupine.CheckResult, len(segs))
	var next, undecided atomic.Int64
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
				limit := perSegment
				if undecided.Load() >= 2 {
					// Past two searches that ran out of time, the rest
					// get a tenth: a run's segments take a millisecond.
					limit /= 10
				}
				if !deadline.IsZero() {
					if left := time.Until(deadline); left <= 0 {
						return
					} else {
						limit = min(limit, left)
					}
				}
				r := porcupine.CheckOperationsTimeout(model, segs[i].operations(), limit)
				out[i] = r
				if r == porcupine.Unknown {
					undecided.Add(1)
					continue
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
