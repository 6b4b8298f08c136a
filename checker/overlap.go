// The overlap analysis: who believed they held each lock when.

package checker

import (
	"cmp"
	"slices"

	"github.com/locktest/locktest/histories"
)

// MaxOverlaps caps the overlapping pairs an analysis lists.
const MaxOverlaps = 1000

// Overlaps analyses a history's lock beliefs; see History.Overlaps.
func Overlaps(ops []histories.Op) OverlapAnalysis { return Build(ops).Overlaps() }

// Overlaps returns the intervals in which each process believed it held each
// lock, the server's deletions of lock keys where the history records them,
// and every pair of processes whose beliefs about one lock overlap (up to
// MaxOverlaps). Intervals touching at an instant do not overlap.
func (h *History) Overlaps() OverlapAnalysis {
	sd := h.story()
	a := OverlapAnalysis{Beliefs: sd.beliefs, Deletions: sd.deletions}
	byKey := map[string][]Belief{}
	for _, b := range sd.beliefs {
		byKey[b.Key] = append(byKey[b.Key], b)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		bs := byKey[k]
		slices.SortStableFunc(bs, func(x, y Belief) int { return cmp.Compare(x.From, y.From) })
		var active []Belief
		for _, b := range bs {
			active = slices.DeleteFunc(active, func(x Belief) bool { return x.To <= b.From })
			if b.To <= b.From {
				continue
			}
			for _, x := range active {
				if x.Process == b.Process {
					continue
				}
				if len(a.Overlaps) == MaxOverlaps {
					a.Truncated = true
					return a
				}
				a.Overlaps = append(a.Overlaps, Overlap{Key: k, First: x, Second: b, From: b.From, To: min(x.To, b.To)})
			}
			active = append(active, b)
		}
	}
	return a
}
