// The overlap analysis: who believed they held each lock when.

package checker

import (
	"maps"
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
	h.overlapsOnce.Do(func() { h.overlaps = h.overlapAnalysis() })
	return h.overlaps
}

func (h *History) overlapAnalysis() OverlapAnalysis {
	sd := h.story()
	a := OverlapAnalysis{Beliefs: sd.beliefs, Deletions: sd.deletions}
	// The beliefs are in order of their start; per key, those held at the
	// start of the one at hand.
	byKey := map[string][]int32{}
	for i := range sd.beliefs {
		byKey[sd.beliefs[i].Key] = append(byKey[sd.beliefs[i].Key], int32(i))
	}
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		var active []int32
		for _, i := range byKey[k] {
			b := sd.beliefs[i]
			active = slices.DeleteFunc(active, func(x int32) bool { return sd.beliefs[x].To <= b.From })
			if b.To <= b.From {
				continue
			}
			for _, xi := range active {
				x := sd.beliefs[xi]
				if x.Process == b.Process {
					continue
				}
				if len(a.Overlaps) == MaxOverlaps {
					a.Truncated = true
					return a
				}
				a.Overlaps = append(a.Overlaps, Overlap{Key: k, First: x, Second: b, From: b.From, To: min(x.To, b.To)})
			}
			active = append(active, i)
		}
	}
	return a
}
