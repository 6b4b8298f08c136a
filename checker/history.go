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
// invocation together with its completion, and the nemesis's and the
// observer's events are read into what the checks and stories draw on
// (faults, deletions, lost leases, who is which client), without the
// records themselves. Build one with a Builder, one record at a time, so
// that long histories need not be held in memory as records; or with Build
// from records. Every check, and the report, reads the same History.
type History struct {
	ops []*operation // client operations, in invocation order
	// alive is, per process, the last time the process was seen acting: its
	// last invocation or definite completion.
	alive map[histories.Process]int64
	// records counts the records paired.
	records int
	// start is the time of the first record; end is later than every event
	// (but at most math.MaxInt64). Operations that may take effect at any
	// time after their invocation return at end: porcupine has no notion of
	// an operation that never returns, and one returning after every other
	// event is the same thing.
	start, end int64
	// writesRejected counts the write fails.
	writesRejected int
	// err is set if the records do not pair up; every check is then unknown.
	err error
	// describe words the faults in stories; nil: generic phrases.
	describe Describer
	// sd is what the nemesis's and observer's events say, with the
	// beliefs.
	sd *storyData
	// errs are the errors the completions give (few have one).
	errs map[*operation]string
	// termsOf gives the words of a backend, by name; nil: LeaseTerms.
	termsOf func(backend string) Terms

	overlapsOnce sync.Once
	overlaps     OverlapAnalysis

	contractOnce sync.Once
	contract     Result
	// classOf is the contract check's class of each overlap, by its two
	// grants.
	classOf map[[2]*operation]string
}

// operation is a client invocation together with its completion.
type operation struct {
	process histories.Process
	f, key  string
	// status is OK, Fail or Info; Info also when the completion is
	// missing (missing).
	status histories.Type
	// call and ret are the times; ret is the history's end if the completion
	// is missing.
	call, ret int64
	// inv and done are the history indices of the records; done is -1 if
	// the completion is missing.
	inv, done int
	// tok is the fencing token: from the completion of an acquire, from the
	// invocation (else the completion) of a write. val is the value written
	// (from the invocation) or read (completion).
	tok, val                int64
	missing, hasTok, hasVal bool
	// applied and lost mark a write of unknown outcome that the resource's
	// own log says it accepted, or never accepted (History.MarkApplied).
	applied, lost bool
	// granted is set for a grant (an acquire ok), and only for one: what
	// only grants have.
	*granted
}

// granted is what a grant has beyond other operations.
type granted struct {
	// rev is the decision revision (0: not recorded); claim is the key
	// the grant says it holds (lock.Keyed; "": not said).
	rev   int64
	claim string
	// revMax is an upper bound on the decision revision, read by locktest
	// after the reply (0: none).
	revMax int64
	// made is the claim's creation point: the token (every token the
	// contract judges by is its key's create revision), or, for a grant
	// without one, the claim_created the servers gave (0: neither).
	made int64
	// belief is the index of the belief the grant started.
	belief int32
	// session is the grantee's session, as its lock told it ("": not
	// told), written as the key-deleted events write leases.
	session string
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

func (o *operation) keyed() bool { return o.claim != "" }

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

	h      *History
	rules  *histories.Tracker
	n      int                 // records added
	open   map[int]*operation  // invocations awaiting completion, by record number
	strs   map[string]string   // interned keys and f's
	wins   map[string][]int    // open fault windows by fault|targets
	one    map[string][]string // single targets, shared
	slab   []operation
	grants []granted
	size   int
	first  bool
}

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder {
	return &Builder{
		h:     &History{alive: map[histories.Process]int64{}, sd: newStoryData()},
		rules: histories.NewTracker(),
		open:  map[int]*operation{},
		strs:  map[string]string{},
		wins:  map[string][]int{},
		one:   map[string][]string{},
		first: true,
	}
}

func (b *Builder) intern(s string) string {
	if v, ok := b.strs[s]; ok {
		return v
	}
	if len(b.strs) < 4096 {
		b.strs[s] = s
	}
	return s
}

func (b *Builder) alloc() *operation {
	if len(b.slab) == 0 {
		// Slabs grow to 1024 operations: few allocations for long
		// histories, little waste for short ones.
		b.size = min(max(2*b.size, 16), 1024)
		b.slab = make([]operation, b.size)
	}
	o := &b.slab[0]
	b.slab = b.slab[1:]
	return o
}

// Add appends one record. Records must come in history order, and keep the
// format's rules (histories.Tracker), which Add applies. After an error,
// the History is malformed and every check on it is unknown; Add keeps
// returning the error.
func (b *Builder) Add(op histories.Op) error {
	if b.h.err != nil {
		return b.h.err
	}
	inv, reason := b.rules.Track(op, b.n, 0)
	if reason != "" {
		b.h.err = fmt.Errorf("index %d: %s", op.Index, reason)
		return b.h.err
	}
	b.add(op, inv)
	return nil
}

// AddPaired appends a record a histories.Reader returned, which applied
// the format's rules: inv is, for a completion, the number of the record
// (counted from 0 among those the Reader returned) whose invocation it
// completes (Reader.Completes); else -1.
func (b *Builder) AddPaired(op histories.Op, inv int) error {
	if b.h.err != nil {
		return b.h.err
	}
	if op.Process != histories.Nemesis && op.Type != histories.Invoke && b.open[inv] == nil {
		b.h.err = fmt.Errorf("index %d: %s %s of process %d completes no invocation", op.Index, op.Type, op.F, op.Process)
		return b.h.err
	}
	b.add(op, inv)
	return nil
}

func (b *Builder) add(op histories.Op, inv int) {
	h := b.h
	n := b.n
	b.n++
	if b.first || op.Time < h.start {
		h.start, b.first = op.Time, false
	}
	if op.Time < math.MaxInt64 {
		h.end = max(h.end, op.Time+1)
	} else {
		h.end = math.MaxInt64
	}
	if op.Process == histories.Nemesis {
		b.event(op)
		return
	}
	if op.Type == histories.Invoke {
		o := b.alloc()
		*o = operation{process: op.Process, f: b.intern(op.F), key: b.intern(op.Key), call: op.Time, inv: op.Index, done: -1}
		if t, ok := op.Token(); ok {
			o.tok, o.hasTok = t, true
		}
		if v, ok := op.Val(); ok && op.F == histories.Write {
			o.val, o.hasVal = v, true
		}
		b.open[n] = o
		h.ops = append(h.ops, o)
		h.alive[op.Process] = max(h.alive[op.Process], op.Time)
		return
	}
	o := b.open[inv]
	delete(b.open, inv)
	o.status, o.done, o.ret = op.Type, op.Index, op.Time
	if op.Error != "" {
		if h.errs == nil {
			h.errs = map[*operation]string{}
		}
		h.errs[o] = op.Error
	}
	if t, ok := op.Token(); ok && (!o.hasTok || op.F == histories.Acquire) {
		o.tok, o.hasTok = t, true
	}
	if op.F == histories.Acquire && op.Type == histories.OK {
		if len(b.grants) == 0 {
			b.grants = make([]granted, 256)
		}
		o.granted = &b.grants[0]
		b.grants = b.grants[1:]
		if r, ok := op.Revision(); ok {
			o.rev = r
		}
		if r, ok := op.RevisionBound(); ok {
			o.revMax = r
		}
		switch c := op.Value; {
		case o.hasTok:
			o.made = o.tok
		case c != nil && c.ClaimCreated != nil:
			o.made = *c.ClaimCreated
		}
		if op.Value != nil {
			o.claim, o.session = op.Value.Claim, op.Value.Session
		}
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
}

// Finish returns the History. Invocations left open count as info. The
// Builder must not be used afterwards.
func (b *Builder) Finish() *History {
	h := b.h
	for _, o := range b.open {
		o.status, o.missing, o.ret = histories.Info, true, h.end
	}
	b.open = nil
	h.describe, h.termsOf = b.Describe, b.Terms
	h.records = b.n
	b.finishEvents()
	h.sd.beliefs = h.beliefs()
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
