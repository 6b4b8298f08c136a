// The mutex check's model: a lock with growing fencing tokens.

package checker

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/anishathalye/porcupine"

	"github.com/locktest/locktest/histories"
)

// The mutex check. Each key's lock is a holder (or none) and the last token
// granted. The operations are modelled as follows.
//
//   - acquire ok with token T: legal only if the lock is free and T is above
//     the last token; the process becomes the holder. A recipe whose token is
//     no fencing token (Redlock's count taken after the grant) promises no
//     order of it: its grants need only a free lock.
//   - release ok: legal only by the holder; frees the lock.
//   - release with unknown outcome (fail, info, no completion) by a process
//     whose acquire ok it follows: returns at the history's end, and when
//     linearized must be by the holder and frees the lock. That covers "it
//     never took effect" too: then the process holds the lock to the end,
//     since no one else can free it, which is the release placed last. (With
//     etcd the lock is freed anyway when the session's lease ends.) Its
//     return is then brought forward to the first grant of the key invoked
//     after it, which it must precede (see spec.bound), or to the return of
//     a retry by the same process.
//   - a process that stops while holding a lock (its last acquire ok on the
//     key has no release after it: the run was interrupted, or the process
//     vanished) gets an implicit release, freeing the lock at an unknown time
//     after the process was last seen acting, as its lease would. Without it
//     every later acquire would be illegal.
//
// Left out of the model, because they cannot constrain it:
//
//   - acquire fail: it had no effect.
//   - acquire with unknown outcome (info, no completion): it may have taken
//     the lock at any time after its invocation; its process never acts again
//     under that number (the workload revokes its session), so the lock was
//     then freed at some later time. Taking and freeing the lock back to back
//     changes only the last token, and a higher last token only forbids later
//     grants, so "it never took effect" is always at least as permissive: the
//     op is a no-op to the check, whatever its token. Leaving it out is
//     equivalent, and spares porcupine a branch per such op: an always-legal
//     op pending to the history's end doubles the states explored while
//     searching an invalid history.
//   - release (of any outcome) not after an acquire ok of its process:
//     there was nothing of its own for it to free. A lock may answer such a
//     release ok (etcd deletes nothing); if it freed another's hold
//     instead, that holder still believes it holds the lock, and the next
//     grant shows it.

// lockState is the state of one key's lock. It is comparable, so porcupine's
// default equality works.
type lockState struct {
	held   bool
	holder histories.Process // 0 when free, so equal states compare equal
	last   int64             // the highest token granted
}

func mutexStep(state, input, _ any) (bool, any) {
	s, c := state.(lockState), input.(*call)
	if c.f == histories.Acquire {
		if s.held || c.hasToken && !c.unordered && c.token <= s.last {
			return false, s
		}
		s.held, s.holder = true, c.process
		if c.hasToken && !c.unordered {
			s.last = c.token
		}
		return true, s
	}
	if !s.held || s.holder != c.process {
		return false, s
	}
	s.held, s.holder = false, 0
	return true, s
}

func describeLockOp(input, _ any) string {
	c := input.(*call)
	switch {
	case c.f == fInit:
		return "segment start: " + describeLockState(c.init)
	case c.implicit:
		return fmt.Sprintf("p%d lock expiry (implicit release)", c.process)
	case c.f == histories.Acquire && c.hasToken:
		return fmt.Sprintf("p%d acquire → token %d", c.process, c.token)
	case c.f == histories.Acquire:
		return fmt.Sprintf("p%d acquire → ok", c.process)
	case c.unknown:
		return fmt.Sprintf("p%d release → unknown", c.process)
	}
	return fmt.Sprintf("p%d release", c.process)
}

func describeLockState(state any) string {
	s := state.(lockState)
	if s.held {
		return fmt.Sprintf("lock held by p%d (last token %d)", s.holder, s.last)
	}
	return fmt.Sprintf("lock free (last token %d)", s.last)
}

var mutexModel = porcupine.Model{
	Partition: byKey,
	Init:      func() any { return lockState{} },
	Step:      mutexStep,
	Hash: func(state any) uint64 {
		s := state.(lockState)
		h := uint64(s.last)*0x9e3779b97f4a7c15 ^ uint64(s.holder)<<1
		if s.held {
			h ^= 1
		}
		return h
	},
	DescribeOperation: describeLockOp,
	DescribeState:     describeLockState,
}

func mutexSpec(h *History) spec {
	s := spec{model: mutexModel, cut: mutexSegments, scan: h.mutexViolations}
	holding := map[hold]*operation{} // acquire ok not yet followed by a release of its process
	released := map[hold]int{}       // index in s.ops of the unknown release that ended the process's hold
	n := 0
	for _, o := range h.ops {
		if o.f == histories.Acquire || o.f == histories.Release {
			n++
		}
	}
	s.ops = make([]porcupine.Operation, 0, n)
	s.covered = make([]*operation, 0, n)
	calls := make([]call, n)
	for _, o := range h.ops {
		if o.f != histories.Acquire && o.f != histories.Release {
			continue
		}
		c := &calls[len(s.covered)]
		*c = call{key: o.key, process: o.process, f: o.f, op: o}
		s.covered = append(s.covered, o)
		k := hold{o.process, o.key}
		a := holding[k]
		r, retry := released[k]
		switch {
		case o.f == histories.Acquire && o.status == histories.OK:
			c.token, c.hasToken = o.token()
			c.unordered = h.story().noFencingToken
			s.add(c, o.call, o.ret)
			holding[k] = o
			delete(released, k)
		case o.f == histories.Acquire:
			s.ignored = append(s.ignored, o)
		case o.status == histories.OK && a == nil && retry:
			// A retried release: the hold ended between the unknown
			// release's invocation and this one's return. The workload
			// never retries (its releases end ok or info, and after info
			// a process never acts again), but a hand-written history may
			// retry a failed release under the same process.
			s.ops[r].Return = min(s.ops[r].Return, o.ret)
			s.ignored = append(s.ignored, o)
		case a == nil:
			s.ignored = append(s.ignored, o)
		case o.status == histories.OK:
			s.add(c, o.call, o.ret)
		default:
			c.unknown = true
			released[k] = len(s.ops)
			s.add(c, o.call, h.end)
		}
		if o.f == histories.Release && a != nil {
			delete(holding, k)
		}
	}
	// Implicit releases, in a deterministic order.
	for _, k := range sortedHolds(holding) {
		a := holding[k]
		seen := max(h.alive[k.p], a.ret)
		s.add(&call{key: k.key, process: k.p, f: histories.Release, unknown: true, implicit: true}, seen, h.end)
	}
	// An unknown release takes effect before any acquire of its key invoked
	// after it is granted: until then its process holds the lock, and only
	// this release can free it.
	s.bound(func(u, q *call) bool { return q.f == histories.Acquire && q.key == u.key })
	return s
}

// tokened is an operation with its token.
type tokened struct {
	o     *operation
	token int64
}

// regression finds the earliest-invoked operation b whose token is below
// (strictly: not above) that of an operation a of the same key that returned
// before b was invoked.
func regression(ops []tokened, strictly bool) (a, b tokened, found bool) {
	byKey := map[string][]tokened{}
	for _, t := range ops {
		byKey[t.o.key] = append(byKey[t.o.key], t)
	}
	for _, ts := range byKey {
		byCall := slices.Clone(ts)
		slices.SortStableFunc(byCall, func(x, y tokened) int { return cmp.Compare(x.o.call, y.o.call) })
		byRet := slices.Clone(ts)
		slices.SortStableFunc(byRet, func(x, y tokened) int { return cmp.Compare(x.o.ret, y.o.ret) })
		var top tokened // highest token among those returned so far
		j := 0
		for _, y := range byCall {
			for ; j < len(byRet) && byRet[j].o.ret < y.o.call; j++ {
				if top.o == nil || byRet[j].token > top.token {
					top = byRet[j]
				}
			}
			if top.o != nil && (y.token < top.token || strictly && y.token == top.token) {
				if !found || y.o.call < b.o.call {
					a, b, found = top, y, true
				}
				break
			}
		}
	}
	return a, b, found
}
