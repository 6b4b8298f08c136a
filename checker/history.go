// A history in the checker's compact form, and the Builder that pairs its
// records.

package checker

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"

	"github.com/locktest/locktest/histories"
)

// History is a paired history in a compact form: each client operation is an
// invocation together with its completion, without the records themselves.
// Build one with a Builder, one record at a time, so that long histories
// need not be held in memory as records; or with Build from records.
type History struct {
	ops     []*operation // client operations, in invocation order
	nemesis []histories.Op
	// alive is, per process, the last time the process was seen acting: its
	// last invocation or definite completion.
	alive map[histories.Process]int64
	// start is the time of the first record; end is later than every event.
	// Operations that may take effect at any time after their invocation
	// return at end: porcupine has no notion of an operation that never
	// returns, and one returning after every other event is the same thing.
	start, end int64
	// writesRejected counts the write fails.
	writesRejected int
	// err is set if the records do not pair up; every check is then unknown.
	err error
	// describe words the faults in stories; nil: generic phrases.
	describe Describer
	// termsOf gives the words of a backend, by name; nil: LeaseTerms.
	termsOf func(backend string) Terms

	storyOnce sync.Once
	storyData *storyData
}

// operation is a client invocation together with its completion.
type operation struct {
	process histories.Process
	f, key  string
	// status is OK, Fail or Info; Info also when the completion is missing.
	status  histories.Type
	missing bool
	// call and ret are the times; ret is the history's end if the completion
	// is missing.
	call, ret int64
	// inv and done are the history indices of the records; done is -1 if
	// the completion is missing.
	inv, done int
	// tok is the fencing token: from the completion of an acquire, from the
	// invocation (else the completion) of a write. val is the value written
	// (from the invocation) or read (completion).
	tok, val       int64
	hasTok, hasVal bool
	// applied and lost mark a write of unknown outcome that the resource's
	// own log says it accepted, or never accepted (History.MarkApplied).
	applied, lost bool
	err           string
	// rev is an acquire ok's decision revision (0: not recorded); keyed
	// says the grant named its key (lock.Keyed).
	rev   int64
	keyed bool
}

// hold names a process's hold of a key's lock.
type hold struct {
	p   histories.Process
	key string
}

// sortedHolds returns the holds of holding by key, then process: what is
// derived from a map must not depend on its order.
func sortedHolds(holding map[hold]*operation) []hold {
	return slices.SortedFunc(maps.Keys(holding), func(a, b hold) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.p, b.p))
	})
}

func (o *operation) unknown() bool { return o.status == histories.Info }

func (o *operation) token() (int64, bool) { return o.tok, o.hasTok }

func (o *operation) value() (int64, bool) { return o.val, o.hasVal }

// Builder pairs records into a History as they are read.
type Builder struct {
	// Describe, if set, words the faults in the History's stories; without
	// it, or for a kind it does not know, a story says "fault KIND on
	// TARGETS was active".
	Describe Describer
	// Terms, if set, gives the words of the history's backend (the setup
	// event's, "" when it names none) for its stories; without it,
	// LeaseTerms.
	Terms func(backend string) Terms

	h        *History
	inflight map[histories.Process]*operation
	strs     map[string]string // interned keys and f's
	slab     []operation
	slabSize int
	first    bool
}

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder {
	return &Builder{
		h:        &History{alive: map[histories.Process]int64{}},
		inflight: map[histories.Process]*operation{},
		strs:     map[string]string{},
		first:    true,
	}
}

func (b *Builder) intern(s string) string {
	if v, ok := b.strs[s]; ok {
		return v
	}
	b.strs[s] = s
	return s
}

func (b *Builder) alloc() *operation {
	if len(b.slab) == 0 {
		// Slabs grow to 1024 operations: few allocations for long
		// histories, little waste for short ones.
		b.slabSize = min(max(2*b.slabSize, 16), 1024)
		b.slab = make([]operation, b.slabSize)
	}
	o := &b.slab[0]
	b.slab = b.slab[1:]
	return o
}

// Add appends one record. Records must come in history order. A completion
// belongs to the process's operation in flight. After an error, the History
// is malformed and every check on it is unknown; Add keeps returning the
// error.
func (b *Builder) Add(op histories.Op) error {
	h := b.h
	if h.err != nil {
		return h.err
	}
	if b.first || op.Time < h.start {
		h.start, b.first = op.Time, false
	}
	if op.Time < math.MaxInt64 {
		h.end = max(h.end, op.Time+1)
	}
	if op.Process == histories.Nemesis {
		h.nemesis = append(h.nemesis, op)
		return nil
	}
	o := b.inflight[op.Process]
	if op.Type == histories.Invoke {
		if o != nil {
			h.err = fmt.Errorf("op %d: process %d invokes %s while %s (op %d) is in flight",
				op.Index, op.Process, op.F, o.f, o.inv)
			return h.err
		}
		o = b.alloc()
		*o = operation{process: op.Process, f: b.intern(op.F), key: b.intern(op.Key), call: op.Time, inv: op.Index, done: -1}
		if t, ok := op.Token(); ok {
			o.tok, o.hasTok = t, true
		}
		if v, ok := op.Val(); ok && op.F == histories.Write {
			o.val, o.hasVal = v, true
		}
		b.inflight[op.Process] = o
		h.ops = append(h.ops, o)
		h.alive[op.Process] = max(h.alive[op.Process], op.Time)
		return nil
	}
	if o == nil || o.f != op.F {
		h.err = fmt.Errorf("op %d: %s %s of process %d does not complete an invocation", op.Index, op.Type, op.F, op.Process)
		return h.err
	}
	delete(b.inflight, op.Process)
	o.status, o.done, o.ret, o.err = op.Type, op.Index, op.Time, op.Error
	if t, ok := op.Token(); ok && (!o.hasTok || op.F == histories.Acquire) {
		o.tok, o.hasTok = t, true
	}
	if r, ok := op.Revision(); ok && op.F == histories.Acquire {
		o.rev = r
	}
	if op.F == histories.Acquire && op.Value != nil && op.Value.Claim != "" {
		o.keyed = true
	}
	if v, ok := op.Val(); ok && !o.hasVal {
		o.val, o.hasVal = v, true
	}
	if op.Type != histories.Info {
		h.alive[op.Process] = max(h.alive[op.Process], op.Time)
	}
	if op.F == histories.Write && op.Type == histories.Fail {
		h.writesRejected++
	}
	return nil
}

// Finish returns the History. Invocations left open count as info. The
// Builder must not be used afterwards.
func (b *Builder) Finish() *History {
	h := b.h
	for _, o := range b.inflight {
		o.status, o.missing, o.ret = histories.Info, true, h.end
	}
	b.inflight = nil
	h.describe, h.termsOf = b.Describe, b.Terms
	return h
}

// Build pairs a whole history.
func Build(ops []histories.Op) *History {
	b := NewBuilder()
	for _, op := range ops {
		if b.Add(op) != nil {
			break
		}
	}
	return b.Finish()
}

// pair is Build returning the pairing error separately.
func pair(ops []histories.Op) (*History, error) {
	h := Build(ops)
	return h, h.err
}

// Err reports whether the records failed to pair up.
func (h *History) Err() error { return h.err }

// WritesRejected counts the writes the resource refused (write fail).
func (h *History) WritesRejected() int { return h.writesRejected }
