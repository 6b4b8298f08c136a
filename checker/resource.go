// The resource check's model: a fenced register.

package checker

import (
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/words"
)

// The resource check. Each key's resource is a fenced register: the highest
// token it has accepted and its value, initially (0, 0). The operations are
// modelled as follows.
//
//   - write ok with token T: legal only if T is at least the highest token;
//     sets both. A write without a token is accepted unfenced: it sets the
//     value only. (A history with such writes, of a lock that gave no token,
//     is then unknown at best: no resource could have fenced them.)
//   - read ok: legal only if it returns the current value. A read made
//     under a token raises the highest token to it: a fenced resource
//     remembers the tokens it has seen, so that an older holder's late
//     write cannot overwrite what a newer holder read and is updating (a
//     lost update). An unfenced resource that accepts such a write fails
//     the check.
//   - write with unknown outcome that the resource's own log shows it
//     accepted (History.MarkApplied): as a write ok that returns at the
//     history's end; one the log does not show had no effect, as a write
//     fail. A timed-out write the resource accepted late, with a
//     stale token, is then caught even if no read ever returned its value.
//   - write with unknown outcome (info, no completion): returns at the
//     history's end; when linearized, it takes effect if its token passes
//     the fence, and is otherwise rejected, a no-op. That covers "it never
//     took effect" too: placed last, its effect is harmless. Its return is
//     then brought forward to that of the first accepted write invoked
//     after it with a higher token (see spec.bound).
//
// Left out of the model, because they cannot constrain it:
//
//   - write fail: it had no effect. Read fail and read info: they constrain
//     nothing.
//   - write with unknown outcome whose value no read of the key returns.
//     "It never took effect" is then always at least as permissive: taking
//     effect raises the highest token (forbidding more later writes) and sets
//     a value no read can observe, until a later write overwrites both. In a
//     real run most unknown writes are of this kind, and each one kept would
//     be an op pending to the end, doubling the states porcupine explores
//     while searching an invalid history.

// register is the state of one key's resource. Its value is not known
// before a write or a read fixes it, in a history that does not say it
// was recorded by a run (whose resource starts empty: 0).
type register struct {
	token, value int64
	known        bool
}

func registerStep(state, input, _ any) (bool, any) {
	s, c := state.(register), input.(*call)
	if c.f == histories.Read {
		if c.hasToken {
			s.token = max(s.token, c.token)
		}
		if !s.known {
			s.value, s.known = c.value, true
			return true, s
		}
		return s.value == c.value, s
	}
	switch {
	case !c.hasToken:
		s.value, s.known = c.value, true
	case c.token >= s.token:
		s.token, s.value, s.known = c.token, c.value, true
	default:
		// The fence rejects it: possible only if its outcome is unknown.
		return c.unknown, s
	}
	return true, s
}

func describeRegisterOp(input, _ any) string {
	c := input.(*call)
	switch c.f {
	case fInit:
		return "segment start: " + describeRegister(c.init)
	case histories.Read:
		return fmt.Sprintf("p%d read → %d", c.process, c.value)
	}
	s := fmt.Sprintf("p%d write %d", c.process, c.value)
	if c.hasToken {
		s += fmt.Sprintf(" with token %d", c.token)
	}
	if c.unknown {
		s += " → unknown"
	}
	return s
}

func describeRegister(state any) string {
	s := state.(register)
	if !s.known {
		return fmt.Sprintf("resource value not yet known (highest token %d)", s.token)
	}
	return fmt.Sprintf("resource value %d (highest token %d)", s.value, s.token)
}

var resourceModel = porcupine.Model{
	Partition: byKey,
	Init:      func() any { return register{} },
	Step:      registerStep,
	Hash: func(state any) uint64 {
		s := state.(register)
		h := uint64(s.token)*0x9e3779b97f4a7c15 ^ uint64(s.value)<<1
		if s.known {
			h ^= 1
		}
		return h
	},
	DescribeOperation: describeRegisterOp,
	DescribeState:     describeRegister,
}

func resourceSpec(h *History) spec {
	// A run's resource starts empty; of a history that does not say it
	// was recorded by one, the first write or read tells the value.
	init := register{known: h.sd.setup != nil}
	s := spec{model: resourceModel, cut: func(key string, ops []porcupine.Operation, minOps int) []segment {
		return timeSegments(key, ops, minOps, init, &registerTracker{})
	}}
	s.model.Init = func() any { return init }
	type kv struct {
		key   string
		value int64
	}
	// The values of unknown writes that reads returned, per key.
	observed := map[kv]bool{}
	n := 0
	for _, o := range h.ops {
		if o.f == histories.Read || o.f == histories.Write {
			n++
		}
		if v, ok := o.value(); ok && o.f == histories.Write && o.unknown() {
			observed[kv{o.key, v}] = false
		}
	}
	if len(observed) > 0 {
		for _, o := range h.ops {
			if v, ok := o.value(); ok && o.f == histories.Read && o.status == histories.OK {
				if _, want := observed[kv{o.key, v}]; want {
					observed[kv{o.key, v}] = true
				}
			}
		}
	}
	s.ops = make([]porcupine.Operation, 0, n)
	s.covered = make([]*operation, 0, n)
	calls := make([]call, n)
	var (
		accepted []tokened
		unfenced int // writes accepted without a token
	)
	for _, o := range h.ops {
		if o.f != histories.Read && o.f != histories.Write {
			continue
		}
		c := &calls[len(s.covered)]
		*c = call{key: o.key, process: o.process, f: o.f, op: o}
		s.covered = append(s.covered, o)
		v, hasValue := o.value()
		c.value = v
		c.token, c.hasToken = o.token()
		switch {
		case !hasValue || o.status == histories.Fail:
			s.ignored = append(s.ignored, o)
		case o.status == histories.OK:
			s.add(c, o.call, o.ret)
			if o.f == histories.Write && c.hasToken {
				accepted = append(accepted, tokened{o, c.token})
			}
			if o.f == histories.Write && !c.hasToken {
				unfenced++
			}
		case o.f == histories.Write && o.lost:
			s.ignored = append(s.ignored, o)
		case o.f == histories.Write && o.applied:
			// The client does not know, the resource does: it took
			// effect, some time before the history's end.
			s.add(c, o.call, h.end)
			if c.hasToken {
				accepted = append(accepted, tokened{o, c.token})
			}
		case o.f == histories.Write && observed[kv{o.key, v}]:
			c.unknown = true
			s.add(c, o.call, h.end)
		default:
			s.ignored = append(s.ignored, o)
		}
	}
	if unfenced > 0 {
		s.unjudged = fmt.Sprintf("The resource accepted %d writes that carried no fencing token (the lock gave none with its grants): no resource can fence them, so whether it accepted a write from a holder whose lock had ended cannot be told from them; the invariant check says whether the data was damaged.", unfenced)
	}
	// Once a write with a higher token is accepted, an unknown write can only
	// be rejected by the fence, a no-op; taking effect just before that
	// write instead leaves the same state, as the write overwrites both.
	s.bound(func(u, q *call) bool {
		return q.f == histories.Write && q.key == u.key && u.hasToken && q.hasToken && q.token > u.token
	})
	s.scan = func() []Violation {
		a, b, ok := regression(accepted, false)
		if !ok {
			return nil
		}
		return []Violation{h.staleWriteViolation(a, b)}
	}
	return s
}

// AppliedWrite is a write the resource says it accepted, from its own log.
type AppliedWrite struct {
	Key          string
	Token, Value int64
}

// MarkApplied tells the history which writes the resource accepted, by the
// resource's own log, which is complete: a write of unknown outcome (info)
// found there did take effect, and the checks hold it to that; one not
// found had none. It returns how many writes it found accepted. The client's history alone cannot tell a
// timed-out write that the resource accepted late from one that never
// arrived; the resource can.
func (h *History) MarkApplied(ws []AppliedWrite) int {
	type id struct {
		key          string
		token, value int64
	}
	log := map[id]int{}
	for _, w := range ws {
		log[id{w.Key, w.Token, w.Value}]++
	}
	n := 0
	for _, o := range h.ops {
		if o.f != histories.Write || o.status != histories.Info || !o.hasTok || !o.hasVal {
			continue
		}
		if k := (id{o.key, o.tok, o.val}); log[k] > 0 {
			log[k]--
			o.applied = true
			n++
		} else {
			o.lost = true
		}
	}
	return n
}

// resourceCut is the resource check's rule for a history cut short: it
// cannot tell whether the resource accepted a write in flight unless the
// resource's log says.
func resourceCut(h *History, r Result, c *Cut, _ time.Duration) string {
	if n, inFlight := h.unsettledWrites(); r.Verdict == Valid && n > 0 {
		return fmt.Sprintf("The run was cut short at %s: %s of unknown outcome (%d in flight at the cut) are in no resource log that says whether the resource accepted them, and a stale write it accepted could hide among them.",
			h.at(c.Time), words.Plural(n, "write"), inFlight)
	}
	return ""
}

// unsettledWrites counts the writes of unknown outcome that no resource
// log settled, and of them those in flight when the history stops. With a
// resource the system under test keeps (etcd's etcd-txn: the setup's
// resource is not the HTTP store), which keeps no log, only those in
// flight count: the others are unknown in a whole run too.
func (h *History) unsettledWrites() (n, inFlight int) {
	r := h.story().setup["resource"]
	txn := r != "" && r != "http"
	for _, o := range h.ops {
		if o.f != histories.Write || o.status != histories.Info || o.applied || o.lost || txn && !o.missing {
			continue
		}
		n++
		if o.missing {
			inFlight++
		}
	}
	return n, inFlight
}
