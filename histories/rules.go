package histories

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
)

// Tracker follows a history record by record and applies the format's
// rules that span records: a completion (ok, fail or info) follows an
// invoke of the same process, f and key, no earlier than it; a process has
// at most one operation in flight, and invokes the next no earlier than
// the last completed; no two records share an index; a
// process number belongs to one client; and the rules for a single record
// beyond its shape (check). It is the one place the format's rules live:
// the Reader applies them, and the checker's Builder pairs with its
// answers.
type Tracker struct {
	inflight map[Process]pending
	// done is, per process, when its last operation completed: a process
	// acts in order, so its next invocation is no earlier.
	done map[Process]int64
	// indexes are the indexes seen, as sorted disjoint runs [from, to],
	// and apart those below the last run's end when seen.
	indexes [][2]int
	apart   map[int]struct{}
	// clients is the client each process event gave a process to, and the
	// line (or operation) that said so.
	clients map[Process]announced
}

// pending is a client invocation awaiting its completion.
type pending struct {
	f, key string
	time   int64
	ord    int
	at     place
}

// place is where a record was found: its line in a file, or else its
// index.
type place struct{ line, index int }

func (p place) String() string {
	if p.line > 0 {
		return "line " + strconv.Itoa(p.line)
	}
	return "index " + strconv.Itoa(p.index)
}

type announced struct {
	client string
	at     place
}

// NewTracker returns a Tracker of an empty history.
func NewTracker() *Tracker {
	return &Tracker{inflight: map[Process]pending{}, done: map[Process]int64{}, clients: map[Process]announced{}}
}

// Track takes a record of a history, numbered ord by the caller and read
// at line (0: not from a file), and returns, for a completion, the number
// of the invocation it completes, or -1. A non-empty reason says which
// rule op breaks; the Tracker is then unchanged.
func (t *Tracker) Track(op Op, ord, line int) (inv int, reason string) {
	if r := check(op); r != "" {
		return -1, r
	}
	if r := t.index(op.Index, true); r != "" {
		return -1, r
	}
	at := place{line, op.Index}
	inv, reason = t.pair(op, ord, at)
	if reason == "" && op.Process == Nemesis && op.F == FProcess {
		reason = t.announce(op, at)
	}
	if reason != "" {
		return -1, reason
	}
	t.index(op.Index, false)
	return inv, ""
}

// Open calls f with the number of each invocation left without a
// completion, in order.
func (t *Tracker) Open(f func(ord int)) {
	ords := make([]int, 0, len(t.inflight))
	for _, in := range t.inflight {
		ords = append(ords, in.ord)
	}
	slices.Sort(ords)
	for _, o := range ords {
		f(o)
	}
}

func (t *Tracker) pair(op Op, ord int, at place) (int, string) {
	if op.Process == Nemesis {
		return -1, ""
	}
	switch op.F {
	case Acquire, Release, Read, Write:
	default:
		return -1, fmt.Sprintf("unknown f %q for process %d", op.F, op.Process)
	}
	in, busy := t.inflight[op.Process]
	if op.Type == Invoke {
		if busy {
			return -1, fmt.Sprintf("process %d invokes %s while %s is in flight (invoked at %s)", op.Process, op.F, in.f, in.at)
		}
		if last, ok := t.done[op.Process]; ok && op.Time < last {
			return -1, fmt.Sprintf("process %d invokes %s at time %d, before its previous operation completed at time %d: a process acts in order", op.Process, op.F, op.Time, last)
		}
		t.inflight[op.Process] = pending{f: op.F, key: op.Key, time: op.Time, ord: ord, at: at}
		return -1, ""
	}
	switch {
	case !busy:
		return -1, fmt.Sprintf("%s for process %d with no invoke in flight", op.Type, op.Process)
	case op.F != in.f:
		return -1, fmt.Sprintf("completion f %q does not match invoke f %q of process %d (invoked at %s)", op.F, in.f, op.Process, in.at)
	case op.Key != in.key:
		return -1, fmt.Sprintf("completion key %q does not match invoke key %q of process %d (invoked at %s)", op.Key, in.key, op.Process, in.at)
	case op.Time < in.time:
		return -1, fmt.Sprintf("completion time %d is before invoke time %d of process %d (invoked at %s)", op.Time, in.time, op.Process, in.at)
	}
	delete(t.inflight, op.Process)
	t.done[op.Process] = op.Time
	return in.ord, ""
}

// announce applies a process event: a process number belongs to one
// client, so that every record of it is that client's (a number announced
// again for another client would make one client's grant another's).
func (t *Tracker) announce(op Op, at place) string {
	p, _ := strconv.ParseInt(op.Value.Params["process"], 10, 64)
	client := op.Value.Targets[0]
	if a, ok := t.clients[Process(p)]; ok && a.client != client {
		return fmt.Sprintf("process %d is announced for client %s, but %s announced it for %s: a process number belongs to one client", p, client, a.at, a.client)
	}
	t.clients[Process(p)] = announced{client, at}
	return ""
}

// index checks that i was not seen before and, unless only checking,
// notes it. Indexes that count up (as every recorded history's do) are
// kept as runs of consecutive numbers, in order, so that they cost a run
// or a few; one below the last run's end (a hand-written history's) is
// kept apart, in a set.
func (t *Tracker) index(i int, check bool) string {
	if i < 0 {
		return fmt.Sprintf("negative index %d", i)
	}
	rs := t.indexes
	k, _ := slices.BinarySearchFunc(rs, i, func(r [2]int, i int) int { return cmp.Compare(r[1], i) })
	_, apart := t.apart[i]
	if k < len(rs) && rs[k][0] <= i || apart {
		return fmt.Sprintf("index %d repeats an earlier record's: each record has its own index", i)
	}
	if check {
		return ""
	}
	switch n := len(rs); {
	case n > 0 && rs[n-1][1] == i-1:
		rs[n-1][1] = i
	case n == 0 || rs[n-1][1] < i:
		rs = append(rs, [2]int{i, i})
	default:
		if t.apart == nil {
			t.apart = map[int]struct{}{}
		}
		t.apart[i] = struct{}{}
	}
	t.indexes = rs
	return ""
}

// check applies the format's rules for a single record beyond its shape:
// the values of a grant and the parameters of the events the checks read
// (histories/README.md). It returns why op breaks them, or "".
func check(op Op) string {
	v := op.Value
	if op.Process != Nemesis {
		if op.F != Acquire || op.Type != OK {
			return ""
		}
		if max, ok := op.RevisionBound(); ok && max < 0 {
			return fmt.Sprintf("negative revision_max %d", max)
		}
		rev, ok := op.Revision()
		if !ok {
			return ""
		}
		if max, ok := op.RevisionBound(); ok && max < rev {
			return fmt.Sprintf("the grant's revision_max %d is below its decision revision %d: a read made after the reply sees the decision's state or a later one", max, rev)
		}
		if rev < 0 {
			return fmt.Sprintf("negative decision revision %d", rev)
		}
		if tok, ok := op.Token(); ok && rev < tok {
			return fmt.Sprintf("the grant's decision revision %d is below its token %d: a grant is decided on a state that holds its key, created at the token's revision", rev, tok)
		}
		return ""
	}
	var params Params
	var targets []string
	if v != nil {
		params, targets = v.Params, v.Targets
	}
	nonNegative := func(names ...string) string {
		for _, name := range names {
			s, ok := params[name]
			if !ok || s == "" {
				continue
			}
			if n, err := strconv.ParseInt(s, 10, 64); err != nil || n < 0 {
				return fmt.Sprintf("%s event: param %s must be a non-negative integer, got %q", op.F, name, s)
			}
		}
		return ""
	}
	switch op.F {
	case FSetup:
		return nonNegative("ttl", "items")
	case FObserved:
		return nonNegative("revision")
	case FLeaseLost:
		return nonNegative("token", "process")
	case FStall:
		return nonNegative("duration_ns")
	case FStarved:
		if len(targets) != 1 || params["duration_ns"] == "" || params["span_ns"] == "" {
			return "starved event: it names one client (targets) and how long its process waited to run (params duration_ns) over how long (params span_ns)"
		}
		return nonNegative("duration_ns", "span_ns", "process", "pid")
	case FProcess:
		if len(targets) != 1 || params["process"] == "" {
			return "process event: it names one client (targets) and the process number it works under (params process)"
		}
		return nonNegative("process")
	case FKeyKept:
		if params["process"] == "" {
			return "key-kept event: it names the process whose release it judged (params process)"
		}
		return nonNegative("process")
	case FKeySet:
		if params["process"] == "" || params["set_ns"] == "" || params["ttl_ms"] == "" {
			return "key-set event: it names the process whose grant it is, and the set_ns and ttl_ms of its key (params process, set_ns, ttl_ms)"
		}
		if r := nonNegative("process", "set_ns", "ttl_ms", "asked_ns", "next_ns", "changed_ns"); r != "" {
			return r
		}
		set, _ := strconv.ParseInt(params["set_ns"], 10, 64)
		for _, after := range []string{"next_ns", "changed_ns"} {
			if t, err := strconv.ParseInt(params[after], 10, 64); err == nil && t < set {
				return fmt.Sprintf("key-set event: %s %d is before set_ns %d", after, t, set)
			}
		}
		if t, err := strconv.ParseInt(params["asked_ns"], 10, 64); err == nil && t > set {
			return fmt.Sprintf("key-set event: asked_ns %d is after set_ns %d", t, set)
		}
	case FKeyDeleted:
		if r := nonNegative("revision", "create_revision", "process"); r != "" {
			return r
		}
		switch params["lease_alive"] {
		case "", "true", "false":
		default:
			return fmt.Sprintf("key-deleted event: param lease_alive must be true or false, got %q", params["lease_alive"])
		}
		rev, _ := strconv.ParseInt(params["revision"], 10, 64)
		created, _ := strconv.ParseInt(params["create_revision"], 10, 64)
		if rev > 0 && created > 0 && rev <= created {
			return fmt.Sprintf("key-deleted event: a key created at revision %d cannot be deleted at revision %d", created, rev)
		}
	}
	return ""
}
