package checker

import (
	"math/rand/v2"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/locktest/locktest/histories"
)

// The reference models state the semantics of unknown outcomes literally,
// with nondeterministic steps, every operation kept, and every unknown one
// pending to the history's end. The checks drop, bound and determinize
// operations for speed; TestAgainstReference checks on random histories that
// they reach the same verdicts.

// refKind says how a reference operation steps.
type refKind int

const (
	refKnown  refKind = iota // as the check's model: the op took effect
	refNoop                  // no effect
	refMaybe                 // took effect (if legal) or not
	refExpire                // a lease expiry: frees the lock if its process holds it
)

type refInput struct {
	c    *call
	kind refKind
}

func refModel(step func(state, input, output any) (bool, any), init any) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
			groups := map[string][]porcupine.Operation{}
			for _, op := range ops {
				k := op.Input.(refInput).c.key
				groups[k] = append(groups[k], op)
			}
			var parts [][]porcupine.Operation
			for _, g := range groups {
				parts = append(parts, g)
			}
			return parts
		},
		Init: func() []any { return []any{init} },
		Step: func(state, input, output any) []any {
			in := input.(refInput)
			switch in.kind {
			case refNoop:
				return []any{state}
			case refExpire:
				if s := state.(lockState); s.held && s.holder == in.c.process {
					return []any{lockState{last: s.last}}
				}
				return []any{state}
			}
			c := *in.c
			c.unknown = false
			ok, next := step(state, &c, output)
			switch {
			case in.kind == refMaybe && ok:
				return []any{state, next}
			case in.kind == refMaybe:
				return []any{state}
			case ok:
				return []any{next}
			}
			return nil
		},
	}
	return nm.ToModel()
}

func refVerdict(name string, ops []histories.Op) Verdict {
	h, err := pair(ops)
	if err != nil {
		panic(err)
	}
	var in []porcupine.Operation
	add := func(o *operation, c *call, kind refKind, callT, retT int64) {
		if c == nil {
			c = &call{key: o.key, process: o.process, f: o.f}
			c.token, c.hasToken = o.token()
			c.value, _ = o.value()
		}
		in = append(in, porcupine.Operation{Input: refInput{c, kind}, Call: callT, Return: retT})
	}
	model := refModel(mutexStep, lockState{})
	if name == "resource" {
		model = refModel(registerStep, register{})
	}
	type pk struct {
		p   histories.Process
		key string
	}
	holding := map[pk]*operation{}
	for _, o := range h.ops {
		if (name == "mutex") != (o.f == histories.Acquire || o.f == histories.Release) {
			continue
		}
		k := pk{o.process, o.key}
		if o.f == histories.Release {
			delete(holding, k)
		}
		switch {
		case o.f == histories.Read && o.status != histories.OK,
			o.status == histories.Fail && o.f != histories.Release:
			add(o, nil, refNoop, o.call, o.ret)
		case o.status == histories.OK:
			add(o, nil, refKnown, o.call, o.ret)
			if o.f == histories.Acquire {
				holding[k] = o
			}
		default:
			add(o, nil, refMaybe, o.call, h.end)
			if o.f == histories.Acquire {
				add(o, &call{key: o.key, process: o.process}, refExpire, o.call, h.end)
			}
		}
	}
	for k, a := range holding {
		add(a, &call{key: k.key, process: k.p}, refExpire, max(h.alive[k.p], a.ret), h.end)
	}
	if porcupine.CheckOperations(model, in) {
		return Valid
	}
	return Invalid
}

// randomHistory makes a small random history on two keys: processes cycle
// through acquire, read, write, release with random outcomes, tokens, values
// and overlapping times. After an unknown outcome a client continues as a new
// process, as in the workload (after finishing its cycle, if it holds the
// lock); a run may end with operations in flight.
func randomHistory(rng *rand.Rand, clients int) []histories.Op {
	h := &hist{}
	next := 10
	status := func(info int) histories.Type {
		switch n := rng.IntN(100); {
		case n < info:
			return histories.Info
		case n < info+10:
			return histories.Fail
		case n < info+15:
			return none
		}
		return histories.OK
	}
	for c := range clients {
		p, t := c, rng.Int64N(4)
		key := []string{"a", "b"}[rng.IntN(2)]
		step := func() (int64, int64) {
			call := t + rng.Int64N(2)
			ret := call + rng.Int64N(4)
			t = ret + rng.Int64N(2)
			return call, ret
		}
		for range 1 + rng.IntN(2) {
			call, ret := step()
			st := status(20)
			if st == histories.Info && rng.IntN(2) == 0 { // an unknown acquire that knew its token
				h.op(p, key, histories.Acquire, call, ret, st, nil, histories.TokenValue(1+rng.Int64N(5)))
			} else {
				h.acq(p, key, call, ret, st, 1+rng.Int64N(5))
			}
			if st == none {
				break
			}
			if st != histories.OK {
				if st == histories.Info {
					p, next = next, next+1
				}
				continue
			}
			call, ret = step()
			if st = status(10); st == none {
				h.read(p, key, call, ret, st, 0)
				break
			}
			h.read(p, key, call, ret, st, rng.Int64N(3))
			call, ret = step()
			st = status(25)
			h.write(p, key, call, ret, st, 1+rng.Int64N(5), rng.Int64N(3))
			if st == none {
				break
			}
			lost := st == histories.Info
			if rng.IntN(6) == 0 { // the client stops holding the lock
				break
			}
			call, ret = step()
			if st = status(20); st == none {
				h.rel(p, key, call, ret, st)
				break
			}
			h.rel(p, key, call, ret, st)
			if lost || st == histories.Info {
				p, next = next, next+1
			}
		}
	}
	return h.ops()
}

func TestAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	count := map[string]map[Verdict]int{"mutex": {}, "resource": {}}
	for i := range 20000 {
		ops := randomHistory(rng, 2+i%3)
		for _, r := range All(ops, Options{}) {
			want := refVerdict(r.Name, ops)
			count[r.Name][want]++
			if r.Verdict != want {
				for _, op := range ops {
					b, _ := histories.MarshalLine(op)
					t.Logf("%s", b)
				}
				t.Fatalf("history %d: %s check says %s, reference %s; explanation:\n%s", i, r.Name, r.Verdict, want, r.Explanation)
			}
		}
	}
	for name, c := range count {
		if c[Valid] < 2000 || c[Invalid] < 2000 {
			t.Errorf("%s: unbalanced sample %v", name, c)
		}
	}
	t.Logf("verdicts: %v", count)
}
