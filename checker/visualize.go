// Porcupine's visualization of a check, for the caller to write.

package checker

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Visualization is porcupine's visualization of one check: the failing
// segments and as many others as Options.VisualizationOps allows, with the
// nemesis's fault windows and the operations left out of the model as
// annotations. Drawing it runs porcupine again on those segments, so it is
// done only when written.
type Visualization struct {
	h       *History
	name    string
	ignored []*operation
	model   porcupine.Model
	// segs are the segments drawn, of total; porcupine runs again on
	// them only when written.
	segs  []segment
	total int
	// limit bounds porcupine's verbose run (0: none).
	limit time.Duration
}

// visualization keeps the segments to draw: the failing ones first, then
// others in order, up to the budget of operations; the rest are let go.
func (h *History) visualization(name string, s spec, model porcupine.Model, segs []segment, failing []int, opt Options) *Visualization {
	v := &Visualization{h: h, name: name, ignored: s.ignored, model: model, total: len(segs)}
	budget := opt.VisualizationOps
	if budget <= 0 {
		budget = DefaultVisualizationOps
	}
	// Drawing runs porcupine again on the segments drawn, at once: bounded
	// as two segments are (a run's segments take a millisecond each).
	v.limit = 2 * opt.segmentTimeout()
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
	for i, sg := range segs {
		if chosen[i] {
			sg.ops = slices.Clone(sg.ops) // not the whole check's array
			v.segs = append(v.segs, sg)
		}
	}
	return v
}

// Write writes the visualization as HTML.
func (v *Visualization) Write(w io.Writer) error {
	var parts [][]porcupine.Operation
	var all []porcupine.Operation
	var lo, hi int64 = math.MaxInt64, math.MinInt64
	for _, sg := range v.segs {
		ops := sg.operations()
		parts = append(parts, ops)
		all = append(all, ops...)
		from, to, _, _ := sg.span()
		lo, hi = min(lo, from), max(hi, to)
	}
	m := v.model
	m.Partition = func([]porcupine.Operation) [][]porcupine.Operation { return parts }
	_, info := porcupine.CheckOperationsVerbose(m, all, v.limit)

	var notes []porcupine.Annotation
	if len(v.segs) < v.total {
		notes = append(notes, porcupine.Annotation{Tag: "locktest", Start: lo, End: lo,
			Description: fmt.Sprintf("%d of %d segments drawn", len(v.segs), v.total),
			Details:     fmt.Sprintf("%s: the visualization shows %d of %d segments (failing ones first); see results.json for the rest", v.name, len(v.segs), v.total)})
	}
	for _, o := range v.ignored {
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
			Details:         "cannot constrain the check: " + v.h.describer()(o),
			BackgroundColor: "#e8e8e8",
		})
	}
	for _, f := range v.h.faults() {
		if f.End < lo || f.Start > hi {
			continue
		}
		notes = append(notes, v.h.faultNote(f))
	}
	info.AddAnnotations(notes)
	return porcupine.Visualize(m, info, w)
}

// faultNote is a visualization annotation for a fault window.
func (h *History) faultNote(f Fault) porcupine.Annotation {
	details := fmt.Sprintf("history index %d: %s", f.Index, h.describeFault(f))
	if len(f.Params) > 0 {
		keys := make([]string, 0, len(f.Params))
		for k := range f.Params {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var ps []string
		for _, k := range keys {
			ps = append(ps, k+"="+f.Params[k])
		}
		details += "; params " + strings.Join(ps, ", ")
	}
	desc := f.Fault
	if len(f.Targets) > 0 {
		desc += " " + strings.Join(f.Targets, ",")
	}
	return porcupine.Annotation{Tag: "nemesis", Start: f.Start, End: f.End, Description: desc, Details: details, BackgroundColor: "#fde2c8"}
}
