// Cutting each key's operations into segments porcupine checks on its own.

package checker

import (
	"cmp"
	"slices"

	"github.com/anishathalye/porcupine"

	"github.com/locktest/locktest/histories"
)

// Segments: P-compositionality in time.
//
// Porcupine's cost grows faster than linearly with the length of a
// partition: its cache keeps, for every step it takes, a copy of a bitset of
// all the partition's operations, so a 100,000-operation key costs gigabytes.
// So each key's operations are cut further, into segments that porcupine
// checks independently, each from the state the earlier segments leave.
//
// Cutting a key's operations into a prefix A and a suffix B is sound and
// complete when
//
//  1. in every legal linearization of the whole, all of A comes before all of
//     B;
//  2. no operation of B returns before an operation of A is invoked (so A's
//     linearization followed by B's respects real time); and
//  3. every legal linearization of A ends in the same state, s_A, which the
//     segmenter computes without porcupine.
//
// Then the whole is linearizable iff A is (from the state before it) and B is
// from s_A. (If the whole is linearizable, by 1 its linearization is one of A
// then one of B, and by 3 B's starts in s_A. Conversely, by 2 and 3 any
// linearization of A followed by one of B is one of the whole.) If A is not
// linearizable, s_A is whatever the segmenter computed: the verdict is
// invalid anyway, and later segments may fail as a consequence.
//
// Condition 2 is checked directly; it is what the segmenters look for. 1 and
// 3 come from the models:
//
//   - A time cut: every operation of A returns before any of B is invoked
//     (the instant between is quiescent: nothing of the key is in flight,
//     including unknown outcomes that could still take effect). 1 and 2
//     follow from real time.
//   - A token cut (mutex): tokens grow with each grant, so every legal
//     linearization orders the grants by token; a release is linearized
//     between the grant of its process's hold and the next grant (the lock
//     must be free for it, and only the holder frees it). So with A the holds
//     whose tokens are at most T, with their releases, and B the rest, 1
//     holds. (If a process's acquires and releases do not alternate, no
//     linearization is legal and 1 holds vacuously.) A token cut needs no
//     quiescent instant: waiting acquires, which overlap everything in a
//     contended run, and unknown releases pending long after their
//     invocation do not prevent it, since only B's returns and A's
//     invocations matter.
//
// For 3: after a mutex segment, the last token is the highest granted (they
// grow), and a process holds the lock iff it acquired once more than it
// released (its acquires and releases alternate). After a register segment,
// the highest token is the highest of the writes (an unknown write with the
// highest token passes the fence wherever it is placed); the value is known
// if the segment has no write, or its last write (invoked after every other
// write returned) is known to have taken effect, or a read invoked after
// every write returned gives it. Where the value is not known, there is no
// cut.

// DefaultSegmentOps is the number of operations a segment collects before it
// is cut at the next sound point.
const DefaultSegmentOps = 200

// segment is a piece of one key's operations that porcupine checks on its own.
type segment struct {
	key string
	ops []porcupine.Operation
	// init is the state before the segment; initial says it is the model's
	// initial state, so no synthetic first operation is needed.
	init    any
	initial bool
}

// fInit is the f of the synthetic operation that sets a segment's initial
// state.
const fInit = "init"

// operations returns what porcupine checks: the segment's operations, after
// a synthetic one setting the state carried in.
func (s segment) operations() []porcupine.Operation {
	if s.initial || len(s.ops) == 0 {
		return s.ops
	}
	first := s.ops[0].Call
	client := 0
	for _, op := range s.ops {
		first = min(first, op.Call)
		client = max(client, op.ClientId+1)
	}
	out := make([]porcupine.Operation, 0, len(s.ops)+1)
	out = append(out, porcupine.Operation{ClientId: client, Input: &call{key: s.key, f: fInit, init: s.init}, Call: first - 1, Return: first - 1})
	return append(out, s.ops...)
}

// span is the first invocation and last return of a segment's operations, and
// the range of history indices they cover.
func (s segment) span() (from, to int64, first, last int) {
	first, last = -1, -1
	for i, op := range s.ops {
		if i == 0 || op.Call < from {
			from = op.Call
		}
		to = max(to, op.Return)
		if o, ok := op.Metadata.(*operation); ok && o != nil {
			if first < 0 || o.inv < first {
				first = o.inv
			}
			last = max(last, o.inv, o.done)
		}
	}
	return from, to, first, last
}

// withInit wraps a step function to handle the synthetic first operation.
func withInit(step func(state, input, output any) (bool, any)) func(state, input, output any) (bool, any) {
	return func(state, input, output any) (bool, any) {
		if c := input.(*call); c.f == fInit {
			return true, c.init
		}
		return step(state, input, output)
	}
}

// tracker follows the state a segment leaves (condition 3 above).
type tracker interface {
	// reset starts a segment from state.
	reset(state any)
	// add adds an operation; time cuts add them in invocation order.
	add(op porcupine.Operation)
	// state is the state after the operations added, and whether it is
	// the same after every legal linearization of them.
	state() (any, bool)
}

// timeSegments cuts one key's operations at quiescent instants where the
// tracker knows the state, once a segment has at least minOps operations.
func timeSegments(key string, ops []porcupine.Operation, minOps int, init any, t tracker) []segment {
	slices.SortStableFunc(ops, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	var segs []segment
	cur := segment{key: key, init: init, initial: true}
	t.reset(init)
	var maxRet int64
	start := 0
	for i, op := range ops {
		if n := i - start; n >= minOps && maxRet < op.Call {
			if st, ok := t.state(); ok {
				cur.ops = ops[start:i:i]
				segs = append(segs, cur)
				cur = segment{key: key, init: st}
				t.reset(st)
				start = i
			}
		}
		if i == start || op.Return > maxRet {
			maxRet = op.Return
		}
		t.add(op)
	}
	cur.ops = ops[start:]
	return append(segs, cur)
}

// mutexSegments cuts one key's lock operations by token where it can, else
// by time.
func mutexSegments(key string, ops []porcupine.Operation, minOps int) []segment {
	t := &lockTracker{}
	var acquires []int
	for i, op := range ops {
		if c := op.Input.(*call); c.f == histories.Acquire {
			if !c.hasToken {
				return timeSegments(key, ops, minOps, lockState{}, t)
			}
			acquires = append(acquires, i)
		}
	}
	if len(acquires) == 0 {
		return timeSegments(key, ops, minOps, lockState{}, t)
	}
	tok := func(i int) int64 { return ops[i].Input.(*call).token }
	slices.SortStableFunc(acquires, func(a, b int) int { return cmp.Or(cmp.Compare(tok(a), tok(b)), cmp.Compare(ops[a].Call, ops[b].Call)) })
	// Groups of holds in token order; equal tokens share a group.
	group := make([]int, len(ops))
	ng := 0
	for j, i := range acquires {
		if j > 0 && tok(i) != tok(acquires[j-1]) {
			ng++
		}
		group[i] = ng
	}
	ng++
	// A process's acquires and releases alternate in every legal
	// linearization, and its acquires are in token order; so if its
	// releases are ordered by real time, its m-th release is linearized
	// between its m-th grant and the next grant of anyone. If real time
	// contradicts that (its m-th release returns before its m-th grant is
	// invoked, or is invoked after its (m+1)-th grant returns, or it
	// releases more often than it acquires), no linearization is legal, any
	// cut meeting condition 2 is sound, and each of its releases goes with
	// its latest grant before it, to keep segments short. If its releases
	// are not ordered by real time, there is no token cut.
	byCall := make([]int, len(ops))
	for i := range byCall {
		byCall[i] = i
	}
	slices.SortStableFunc(byCall, func(a, b int) int { return cmp.Compare(ops[a].Call, ops[b].Call) })
	grants := map[histories.Process][]int{}   // per process, its acquires in token order
	releases := map[histories.Process][]int{} // per process, its releases by invocation
	lastAny := make([]int, len(ops))          // per release, the group of the latest acquire invoked before it
	latest := 0
	for _, i := range acquires {
		p := ops[i].Input.(*call).process
		grants[p] = append(grants[p], i)
	}
	for _, i := range byCall {
		c := ops[i].Input.(*call)
		if c.f == histories.Acquire {
			latest = group[i]
			continue
		}
		rs := releases[c.process]
		if len(rs) > 0 && ops[rs[len(rs)-1]].Return >= ops[i].Call {
			return timeSegments(key, ops, minOps, lockState{}, t)
		}
		releases[c.process] = append(releases[c.process], i)
		lastAny[i] = latest
	}
	for p, rs := range releases {
		gs := grants[p]
		consistent := len(rs) <= len(gs)
		for m := 0; consistent && m < len(rs); m++ {
			r := ops[rs[m]]
			consistent = r.Return >= ops[gs[m]].Call && (m+1 >= len(gs) || ops[gs[m+1]].Return >= r.Call)
		}
		if consistent {
			for m, i := range rs {
				group[i] = group[gs[m]]
			}
			continue
		}
		byRet := slices.Clone(gs)
		slices.SortFunc(byRet, func(a, b int) int { return cmp.Compare(ops[a].Return, ops[b].Return) })
		for _, i := range rs {
			// The grant returned last before the release was invoked.
			j, _ := slices.BinarySearchFunc(byRet, ops[i].Call, func(g int, t int64) int { return cmp.Compare(ops[g].Return, t) })
			if j > 0 {
				group[i] = group[byRet[j-1]]
			} else {
				group[i] = lastAny[i]
			}
		}
	}
	members := make([][]int, ng)
	maxCall := make([]int64, ng)
	minRet := make([]int64, ng)
	for _, i := range byCall {
		g := group[i]
		if len(members[g]) == 0 {
			maxCall[g], minRet[g] = ops[i].Call, ops[i].Return
		}
		members[g] = append(members[g], i)
		maxCall[g] = max(maxCall[g], ops[i].Call)
		minRet[g] = min(minRet[g], ops[i].Return)
	}
	for g := 1; g < ng; g++ {
		maxCall[g] = max(maxCall[g], maxCall[g-1]) // prefix maxima
	}
	for g := ng - 2; g >= 0; g-- {
		minRet[g] = min(minRet[g], minRet[g+1]) // suffix minima
	}
	var segs []segment
	cur := segment{key: key, init: lockState{}, initial: true}
	t.reset(cur.init)
	for g := range ng {
		for _, i := range members[g] {
			cur.ops = append(cur.ops, ops[i])
			t.add(ops[i])
		}
		if g+1 < ng && len(cur.ops) >= minOps && maxCall[g] <= minRet[g+1] {
			st, _ := t.state()
			segs = append(segs, cur)
			cur = segment{key: key, init: st}
			t.reset(st)
		}
	}
	return append(segs, cur)
}

// lockTracker follows a mutex segment: per process, acquires minus releases.
type lockTracker struct {
	init lockState
	n    map[histories.Process]int
	last int64
}

func (t *lockTracker) reset(state any) {
	t.init = state.(lockState)
	t.n = map[histories.Process]int{}
	if t.init.held {
		t.n[t.init.holder] = 1
	}
	t.last = t.init.last
}

func (t *lockTracker) add(op porcupine.Operation) {
	c := op.Input.(*call)
	if c.f == histories.Acquire {
		t.n[c.process]++
		if c.hasToken {
			t.last = max(t.last, c.token)
		}
		return
	}
	t.n[c.process]--
}

// state is always determined; if the counts are not 0 or 1 with at most one
// holder, no linearization is legal and any state will do.
func (t *lockTracker) state() (any, bool) {
	s := lockState{last: t.last}
	for p, n := range t.n {
		if n == 1 && (!s.held || p < s.holder) {
			s.held, s.holder = true, p
		}
	}
	return s, true
}

// registerTracker follows a resource segment (see condition 3 above).
type registerTracker struct {
	init   register
	token  int64
	writes int
	// The two latest write returns, and which write has the latest.
	ret1, ret2 int64
	arg1       *call
	// The last write invoked: whether it is known to take effect.
	lastWrite      *call
	lastWriteCall  int64
	lastWriteKnown bool
	// The last ok read invoked.
	lastRead     *call
	lastReadCall int64
}

func (t *registerTracker) reset(state any) {
	*t = registerTracker{init: state.(register), token: state.(register).token}
}

func (t *registerTracker) add(op porcupine.Operation) {
	c := op.Input.(*call)
	if c.f == histories.Read {
		t.lastRead, t.lastReadCall = c, op.Call
		if c.hasToken {
			t.token = max(t.token, c.token)
		}
		return
	}
	if c.hasToken {
		t.token = max(t.token, c.token)
	}
	switch {
	case t.writes == 0 || op.Return > t.ret1:
		t.ret2, t.ret1, t.arg1 = t.ret1, op.Return, c
	case t.writes == 1 || op.Return > t.ret2:
		t.ret2 = op.Return
	}
	t.writes++
	t.lastWrite, t.lastWriteCall, t.lastWriteKnown = c, op.Call, !c.unknown
}

func (t *registerTracker) state() (any, bool) {
	if t.writes == 0 {
		if t.lastRead != nil && !t.init.known { // every read saw the value it fixed
			return register{token: t.token, value: t.lastRead.value, known: true}, true
		}
		return register{token: t.token, value: t.init.value, known: t.init.known}, true
	}
	// A read invoked after every write returned.
	if t.lastRead != nil && t.lastReadCall > t.ret1 {
		return register{token: t.token, value: t.lastRead.value, known: true}, true
	}
	// The last write invoked, after every other write returned.
	if t.lastWriteKnown {
		others := t.ret1
		if t.arg1 == t.lastWrite {
			others = t.ret2
		}
		if t.writes == 1 || t.lastWriteCall > others {
			return register{token: t.token, value: t.lastWrite.value, known: true}, true
		}
	}
	return nil, false
}

// segmentAll partitions a check's operations by key, then each key's into
// segments, in key order.
func segmentAll(ops []porcupine.Operation, minOps int, cut func(key string, ops []porcupine.Operation, minOps int) []segment) []segment {
	var segs []segment
	for _, part := range byKey(ops) {
		segs = append(segs, cut(part[0].Input.(*call).key, part, minOps)...)
	}
	return segs
}
