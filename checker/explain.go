// Why porcupine found a segment not linearizable, in words.

package checker

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/words"
)

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
	where := fmt.Sprintf("porcupine needed only history indices %d to %d (%s to %s, %s of key %q", first, last, h.at(from), h.at(min(to, h.end)), words.Plural(len(seg.ops), "operation"), seg.key)
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
		s += fmt.Sprintf(", nor can the %s invoked by then (%s)", words.Plural(n, "other"), strings.Join(others, "; "))
	default:
		s += fmt.Sprintf(", nor can the %s invoked by then (%s; …)", words.Plural(n, "other"), strings.Join(others, "; "))
	}
	return s + "."
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
