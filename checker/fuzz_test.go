package checker

import (
	"bytes"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/fuzzseed"
)

// The fuzz targets read any input as a history (through the Reader, as
// `locktest check` does), run a check, and hold it to what every verdict
// must be: one of valid, invalid, unknown; never valid on nothing; an
// invalid one with its violations told; an unknown one saying why; and
// the same verdict when every time is shifted, or (contract) when the
// server's deletions come in another order. Their seeds are the curated
// histories and the hand-written ones of the tests.

// fuzzSeeds adds the seed histories.
func fuzzSeeds(f *testing.F) {
	for _, b := range fuzzseed.Histories(f, "..") {
		f.Add(b)
	}
}

// readHistory reads b as a history file; false if malformed.
func readHistory(b []byte) ([]histories.Op, bool) {
	ops, err := histories.ReadAll(bytes.NewReader(b), "h.jsonl")
	return ops, err == nil
}

// fuzzOptions bound a check on a small input generously.
var fuzzOptions = Options{Timeout: 20 * time.Second, LivenessBound: time.Second}

// holdsTo checks what every verdict of a check must be.
func holdsTo(t *testing.T, name string, r Result) {
	t.Helper()
	switch {
	case r.Name != name:
		t.Fatalf("result of %s named %q", name, r.Name)
	case r.Verdict == Invalid && len(r.Violations) == 0:
		t.Fatalf("%s invalid without a violation: %s", name, r.Explanation)
	case r.Verdict == Unknown && r.Explanation == "":
		t.Fatalf("%s unknown without saying why", name)
	case r.Verdict == Valid && r.Ops == 0 && name != histories.CheckConsistency:
		t.Fatalf("%s valid on nothing", name)
	case r.Verdict != Valid && r.Verdict != Invalid && r.Verdict != Unknown:
		t.Fatalf("%s verdict %q", name, r.Verdict)
	}
	for _, v := range r.Violations {
		if v.Story == "" {
			t.Fatalf("%s violation without a story: %+v", name, v)
		}
	}
}

// timedOut says whether a check stopped at its time limit.
func timedOut(r Result) bool {
	return r.Segments > 0 && r.Checked < r.Segments
}

// shifted moves every record by d, if no time then leaves int64.
func shifted(ops []histories.Op, d int64) ([]histories.Op, bool) {
	out := slices.Clone(ops)
	for i := range out {
		if out[i].Time > math.MaxInt64-d {
			return nil, false
		}
		out[i].Time += d
	}
	return out, true
}

// fuzzCheck is a fuzz target of one check of the registry.
func fuzzCheck(f *testing.F, name string, more func(t *testing.T, ops []histories.Op, r Result)) {
	var judge func(Input) Result
	for _, c := range Checks() {
		if c.Name == name {
			judge = c.Judge
		}
	}
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		ops, ok := readHistory(b)
		if !ok {
			return
		}
		r := judge(Input{History: Build(ops), Options: fuzzOptions})
		holdsTo(t, name, r)
		if timedOut(r) {
			return
		}
		// An hour and a bit later, the same history.
		if later, ok := shifted(ops, int64(time.Hour)+123); ok {
			if s := judge(Input{History: Build(later), Options: fuzzOptions}); s.Verdict != r.Verdict && !timedOut(s) {
				t.Fatalf("%s: %s, and %s with every time an hour later:\n%s\n---\n%s", name, r.Verdict, s.Verdict, r.Explanation, s.Explanation)
			}
		}
		if more != nil {
			more(t, ops, r)
		}
	})
}

func FuzzMutex(f *testing.F)     { fuzzCheck(f, histories.CheckMutex, nil) }
func FuzzResource(f *testing.F)  { fuzzCheck(f, histories.CheckResource, nil) }
func FuzzInvariant(f *testing.F) { fuzzCheck(f, histories.CheckInvariant, nil) }
func FuzzLiveness(f *testing.F)  { fuzzCheck(f, histories.CheckLiveness, nil) }

// FuzzContract also holds the contract to the order of the server's
// deletions not mattering: the history's records of them, reversed, give
// the same verdict.
func FuzzContract(f *testing.F) {
	fuzzCheck(f, histories.CheckContract, func(t *testing.T, ops []histories.Op, r Result) {
		var at []int
		for i, op := range ops {
			if op.Process == histories.Nemesis && op.F == histories.FKeyDeleted {
				at = append(at, i)
			}
		}
		if len(at) < 2 {
			return
		}
		reordered := slices.Clone(ops)
		for k, i := range at {
			reordered[i] = ops[at[len(at)-1-k]]
		}
		if s := Build(reordered).Contract(); s.Verdict != r.Verdict {
			t.Fatalf("contract %s, and %s with the deletions in reverse order:\n%s\n---\n%s", r.Verdict, s.Verdict, r.Explanation, s.Explanation)
		}
	})
}

// FuzzConsistency reads its input as member hashes, a line each: a member
// name, a revision and a hash, or an error.
func FuzzConsistency(f *testing.F) {
	f.Add([]byte("m0 40 abc\nm1 40 abc\nm2 40 abc\n"))
	f.Add([]byte("m0 40 abc\nm1 41 def\nm2 40 abc\nm3 - timeout\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var hashes []MemberHash
		for line := range bytes.Lines(b) {
			fields := bytes.Fields(line)
			if len(fields) < 3 {
				continue
			}
			m := MemberHash{Member: string(fields[0])}
			if string(fields[1]) == "-" {
				m.Err = string(fields[2])
			} else {
				for _, c := range fields[1] {
					m.Revision = m.Revision*10 + int64(c%10)
				}
				for _, c := range fields[2] {
					m.Hash = m.Hash*31 + uint32(c)
				}
			}
			hashes = append(hashes, m)
		}
		r := Consistency(hashes)
		holdsTo(t, histories.CheckConsistency, r)
		if len(hashes) > 0 && r.Ops != len(hashes) {
			t.Fatalf("%d hashes, %d compared", len(hashes), r.Ops)
		}
	})
}

// source hands out decisions from a fuzzer's bytes (zeros once they run
// out).
type source struct {
	b []byte
	i int
}

func (s *source) next() int {
	if s.i >= len(s.b) {
		return 0
	}
	s.i++
	return int(s.b[s.i-1])
}

func (s *source) n(k int) int { return s.next() % k }

// generated makes a history of the format's rules (pairing, revisions,
// process numbers) from a fuzzer's bytes: clients contending for one or
// two locks with reads, writes and releases of every outcome, faults, the
// observer's deletions of every cause (some missing what a check needs),
// process events, a TTL or none, times that jump.
func generated(b []byte) []histories.Op {
	s := &source{b: b}
	var ops []histories.Op
	now := int64(s.n(4)) * int64(time.Hour)
	rev := int64(1)
	add := func(op histories.Op) {
		op.Time = now
		ops = append(ops, op)
	}
	nemesis := func(f string, v *histories.Value) {
		add(histories.Op{Type: histories.Info, F: f, Process: histories.Nemesis, Value: v})
	}
	if s.n(4) > 0 {
		p := histories.Params{"workload": []string{"counter", "stock"}[s.n(2)], "items": "3"}
		if s.n(3) > 0 {
			p["ttl"] = []string{"1", "2", "9223372036854775807"}[s.n(3)]
		}
		nemesis(histories.FSetup, &histories.Value{Params: p})
	}
	type client struct {
		p                histories.Process
		name             string
		holds            bool
		tok, read        int64
		hasRead, pending bool
		key              string
	}
	clients := make([]*client, 2+s.n(3))
	next := histories.Process(len(clients))
	for i := range clients {
		clients[i] = &client{p: histories.Process(i), name: "c" + string(rune('0'+i)), key: []string{"lock", "lock", "other"}[s.n(3)]}
		if s.n(3) > 0 {
			nemesis(histories.FProcess, &histories.Value{Targets: []string{clients[i].name}, Params: histories.Params{"process": clients[i].p.String()}})
		}
	}
	var keys []int64 // tokens of keys that may be deleted
	open := map[string]bool{}
	for steps := 0; steps < 60 && s.i < len(s.b); steps++ {
		switch jump := s.n(16); {
		case jump == 0:
			now += int64(s.n(200)) * int64(time.Second)
		case jump < 12:
			now += int64(s.n(50)) * int64(time.Millisecond)
		}
		c := clients[s.n(len(clients))]
		client := func(typ histories.Type, f string, v *histories.Value) {
			add(histories.Op{Type: typ, F: f, Process: c.p, Key: c.key, Value: v})
		}
		outcome := []histories.Type{histories.OK, histories.OK, histories.OK, histories.Fail, histories.Info}[s.n(5)]
		renumber := func() {
			if outcome == histories.Info {
				c.p, next = next, next+1
				c.holds = false
				if s.n(2) == 0 {
					nemesis(histories.FProcess, &histories.Value{Targets: []string{c.name}, Params: histories.Params{"process": c.p.String()}})
				}
			}
		}
		switch kind := s.n(9); {
		case kind < 2 && !c.holds:
			client(histories.Invoke, histories.Acquire, nil)
			if s.n(8) == 0 {
				c.pending = true // never completed: its process stops
				c.p, next = next, next+1
				continue
			}
			now += int64(s.n(30)) * int64(time.Millisecond)
			rev += int64(s.n(3))
			tok := rev
			keys = append(keys, tok)
			rev += int64(s.n(3))
			var v *histories.Value
			if outcome == histories.OK {
				claim := []string{"/l/" + c.key + "/" + c.name + string(rune('a'+s.n(3))), "/l/" + c.key, ""}[s.n(3)]
				v = histories.GrantValue(tok, rev*int64(s.n(2)), claim)
				c.holds, c.tok = true, tok
			}
			client(outcome, histories.Acquire, v)
			renumber()
		case kind < 4 && c.holds:
			client(histories.Invoke, histories.Read, histories.TokenValue(c.tok))
			now += int64(s.n(20)) * int64(time.Millisecond)
			val := int64(s.n(6))
			var v *histories.Value
			if outcome == histories.OK {
				v = histories.ReadValue(val)
				c.read, c.hasRead = val, true
			}
			client(outcome, histories.Read, v)
			renumber()
		case kind < 6 && c.holds:
			val := c.read + 1
			if !c.hasRead || s.n(6) == 0 {
				val = int64(s.n(6))
			}
			client(histories.Invoke, histories.Write, histories.WriteValue(c.tok, val))
			now += int64(s.n(20)) * int64(time.Millisecond)
			client(outcome, histories.Write, histories.WriteValue(c.tok, val))
			renumber()
		case kind < 7:
			client(histories.Invoke, histories.Release, nil)
			now += int64(s.n(20)) * int64(time.Millisecond)
			client(outcome, histories.Release, nil)
			c.holds = c.holds && outcome == histories.Fail
			renumber()
		case kind < 8:
			kinds := []string{"pause-client", "lease-revoke", "isolate", "banana"}
			k := kinds[s.n(len(kinds))]
			switch {
			case open[k] && s.n(2) == 0:
				nemesis(histories.FStop, &histories.Value{Fault: k, Targets: []string{c.name}})
				open[k] = false
			case s.n(6) == 0:
				nemesis(histories.FHeal, &histories.Value{Fault: histories.HealAll})
				open = map[string]bool{}
			default:
				nemesis(histories.FStart, &histories.Value{Fault: k, Targets: []string{c.name}})
				open[k] = true
			}
		case len(keys) > 0:
			tok := keys[s.n(len(keys))]
			rev++
			p := histories.Params{"key": c.key, "by": []string{"release", "expiry", "revoke", "other-release", "acquire"}[s.n(5)]}
			if s.n(6) > 0 { // the key's create revision, or 0: not known
				p["create_revision"] = histories.Process(tok * int64(min(1, s.n(6)))).String()
			}
			if s.n(6) > 0 {
				p["revision"] = histories.Process(rev).String()
			}
			if s.n(3) > 0 {
				p["lease_alive"] = []string{"true", "false"}[s.n(2)]
			}
			if s.n(2) == 0 {
				p["process"] = c.p.String()
			}
			if p["by"] == histories.DeletedByOther {
				p["released_by"] = clients[s.n(len(clients))].name
				p["released_token"] = histories.Process(keys[s.n(len(keys))]).String()
			}
			nemesis(histories.FKeyDeleted, &histories.Value{Targets: []string{c.name}, Params: p})
		}
	}
	if s.n(3) > 0 {
		nemesis(histories.FObserved, &histories.Value{Params: histories.Params{"revision": histories.Process(rev).String()}})
	}
	for i := range ops {
		ops[i].Index = i
	}
	return ops
}

// FuzzGenerated builds a history of the format's rules from the fuzzer's
// bytes and runs every check on it, holding each to its verdict's rules,
// to the same verdicts with every time shifted, and the contract to the
// same verdict with the deletions reordered; and the history written out
// and read back judges the same.
func FuzzGenerated(f *testing.F) {
	for _, seed := range []string{"", "\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a", "acquire read write release expiry observed heal",
		string(bytes.Repeat([]byte{0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 8}, 20))} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ops := generated(b)
		h := Build(ops)
		if h.err != nil {
			t.Fatalf("the generator broke the format's rules: %v", h.err)
		}
		rs := Judge(Input{History: h, Options: fuzzOptions})
		for _, r := range rs {
			holdsTo(t, r.Name, r)
		}
		later, ok := shifted(ops, int64(time.Hour)+123)
		if !ok {
			return
		}
		var buf bytes.Buffer
		w := histories.NewWriter(&buf)
		for _, op := range later {
			if _, err := w.Write(op); err != nil {
				t.Fatal(err)
			}
		}
		again, ok := readHistory(buf.Bytes())
		if !ok {
			t.Fatalf("the history written does not read:\n%s", buf.String())
		}
		for i, s := range Judge(Input{History: Build(again), Options: fuzzOptions}) {
			if r := rs[i]; s.Verdict != r.Verdict && !timedOut(r) && !timedOut(s) {
				t.Fatalf("%s: %s, and %s with every time an hour later, written and read again:\n%s\n---\n%s\n%s", r.Name, r.Verdict, s.Verdict, r.Explanation, s.Explanation, buf.String())
			}
		}
	})
}
