package checker

import (
	"math/rand/v2"
	"testing"
	"time"

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
		held := holding[k] != nil
		if o.f == histories.Release {
			delete(holding, k)
		}
		switch {
		case o.f == histories.Read && o.status != histories.OK,
			o.status == histories.Fail && o.f != histories.Release,
			o.f == histories.Release && !held: // nothing of its own to free
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
	if len(in) == 0 {
		return Unknown // nothing to judge
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
	return randomHistoryN(rng, clients, 2)
}

// randomHistoryN is randomHistory with each client doing 1 to cycles cycles.
func randomHistoryN(rng *rand.Rand, clients, cycles int) []histories.Op {
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
		for range 1 + rng.IntN(cycles) {
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
			if rng.IntN(2) == 0 {
				h.readTok(p, key, call, ret, st, 1+rng.Int64N(5), rng.Int64N(3))
			} else {
				h.read(p, key, call, ret, st, rng.Int64N(3))
			}
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
	cut := map[string]int{} // histories the segmented path cut
	for i := range 20000 {
		ops := randomHistory(rng, 2+i%3)
		// The default path, and the segmented one cutting wherever it may.
		// Porcupine decides these small histories in microseconds; the
		// segments' time bound is a wall-clock one, which a loaded machine
		// once let a three-operation segment run out of (unknown, not the
		// reference's verdict), so it is lifted here.
		opt := Options{SegmentTimeout: time.Minute}
		whole := Linearizable(ops, opt)
		opt.SegmentOps = 1
		segmented := Linearizable(ops, opt)
		for j, r := range whole {
			want := refVerdict(r.Name, ops)
			count[r.Name][want]++
			s := segmented[j]
			if s.Segments > s.Keys {
				cut[r.Name]++
			}
			if r.Verdict != want || s.Verdict != want {
				for _, op := range ops {
					b, _ := histories.MarshalLine(op)
					t.Logf("%s", b)
				}
				t.Fatalf("history %d: %s check says %s, segmented into %d: %s, reference %s; explanations:\n%s\n%s",
					i, r.Name, r.Verdict, s.Segments, s.Verdict, want, r.Explanation, s.Explanation)
			}
		}
	}
	for name, c := range count {
		if c[Valid] < 2000 || c[Invalid] < 2000 {
			t.Errorf("%s: unbalanced sample %v", name, c)
		}
		if cut[name] < 2000 {
			t.Errorf("%s: only %d histories were cut into segments", name, cut[name])
		}
	}
	t.Logf("verdicts: %v; histories cut into segments: %v", count, cut)
}

// TestSegmentsAgainstReference checks the segmented path on longer histories,
// with more points to cut at.
func TestSegmentsAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 3))
	count := map[string]map[Verdict]int{"mutex": {}, "resource": {}}
	segs := map[string]int{}
	for i := range 3000 {
		ops := randomHistoryN(rng, 2+i%2, 5)
		for _, r := range Linearizable(ops, Options{SegmentOps: 1}) {
			want := refVerdict(r.Name, ops)
			count[r.Name][want]++
			segs[r.Name] += r.Segments - r.Keys
			if r.Verdict != want {
				for _, op := range ops {
					b, _ := histories.MarshalLine(op)
					t.Logf("%s", b)
				}
				t.Fatalf("history %d: %s check segmented into %d says %s, reference %s; explanation:\n%s", i, r.Name, r.Segments, r.Verdict, want, r.Explanation)
			}
		}
	}
	t.Logf("verdicts: %v; cuts made: %v", count, segs)
}

// TestGeneratedAgainstReference checks the segmented path on contended
// histories (waiting acquires overlap everything, so only token cuts apply),
// valid and mutated.
func TestGeneratedAgainstReference(t *testing.T) {
	count := map[string]map[Verdict]int{"mutex": {}, "resource": {}}
	segs := map[string]int{}
	for seed := range uint64(5000) {
		ops := generate(30, 4, 0.1, seed)
		rng := rand.New(rand.NewPCG(seed, 9))
		switch seed % 4 {
		case 1: // swap two tokens
			var grants []int
			for i, op := range ops {
				if op.F == histories.Acquire && op.Type == histories.OK {
					grants = append(grants, i)
				}
			}
			a, b := grants[rng.IntN(len(grants))], grants[rng.IntN(len(grants))]
			ops[a].Value, ops[b].Value = ops[b].Value, ops[a].Value
		case 2: // drop a record
			i := rng.IntN(len(ops))
			ops = append(ops[:i:i], ops[i+1:]...)
		case 3: // move a record's time
			i := rng.IntN(len(ops))
			ops[i].Time += (rng.Int64N(20) - 10) * ms
			ops[i].Time = max(ops[i].Time, 0)
		}
		h, err := pair(ops)
		if err != nil || h.err != nil {
			continue
		}
		for _, r := range Linearizable(ops, Options{SegmentOps: 1}) {
			want := refVerdict(r.Name, ops)
			count[r.Name][want]++
			segs[r.Name] += r.Segments - r.Keys
			if r.Verdict != want {
				for _, op := range ops {
					b, _ := histories.MarshalLine(op)
					t.Logf("%s", b)
				}
				t.Fatalf("seed %d: %s check segmented into %d says %s, reference %s; explanation:\n%s", seed, r.Name, r.Segments, r.Verdict, want, r.Explanation)
			}
		}
	}
	t.Logf("verdicts: %v; cuts made: %v", count, segs)
}
