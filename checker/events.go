// Reading the nemesis and workload events of a history into what stories
// and checks draw on: fault windows, deletions, lost leases, beliefs.

package checker

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locktest/locktest/histories"
)

// leaseLost is a "lease-lost" nemesis event.
type leaseLost struct {
	key     string
	token   int64
	targets []string
	time    int64
	index   int
}

// keyKept is a "key-kept" event: right after process's release returned
// ok, the server still held its grant's key.
type keyKept struct {
	key     string
	process histories.Process
	time    int64
	index   int
}

// keySet is a "key-set" event: what the server took of process's grant's
// key, on its own clock placed in the history. asked, next and changed
// are -1 when the event does not tell them.
type keySet struct {
	key                       string
	process                   histories.Process
	set, asked, next, changed int64
	ttl                       time.Duration
	index                     int
}

// storyData is what the nemesis's and the workload's events say, read as
// the records come (Builder.event), and the beliefs, derived from the
// operations when the history is finished.
type storyData struct {
	// clients names the client behind each process, from the workload's
	// "process" events.
	clients map[histories.Process]string
	// faults are the fault windows, from "start" to "stop" (or the final
	// "heal", or the end of the history); byStart orders them by start,
	// with endMax the latest end among the first i of that order.
	faults  []Fault
	byStart []int
	endMax  []int64
	// others are nemesis events of an f the checks do not read, kept for
	// the report to show: they are not faults (a fault is a start).
	others []Fault
	// stalls are the spans in which locktest's own process did not run
	// (stall events), in the order recorded.
	stalls []Fault
	// starved are the spans in which a client's lock process waited to
	// run (starved events), in the order recorded.
	starved []starvedSpan
	// heal is the time of the last "heal"; -1 if none.
	heal      int64
	deletions []Deletion
	lost      []leaseLost
	kept      []keyKept
	sets      []keySet
	beliefs   []Belief
	// byToken orders the beliefs with a token by token, then key;
	// byProcess holds a process's beliefs; toMax[i] is the latest end of
	// beliefs[:i+1]. (A grant's belief is its operation's belief.)
	byToken   []int32
	byProcess map[histories.Process][]int
	toMax     []int64
	// lockerFailed are the times a client could not build its locker
	// (the recipe's New failed), from "locker-failed" events.
	lockerFailed []lockerFailure
	// ttl is the lease TTL from the setup event (0: not recorded);
	// observed the revision up to which the history holds every deletion
	// of a lock key (0: not recorded, or a server without revisions);
	// observedAll whether an observed event says the history holds every
	// deletion the server reported.
	ttl         time.Duration
	observed    int64
	observedAll bool
	// setup holds the setup event's params (nil: none), among them
	// backend, the system under test ("" in a history from before it was
	// recorded), and recipe, the lock recipe.
	setup   map[string]string
	backend string
	recipe  string
	// noFencingToken: the setup event says the recipe's token is no
	// fencing token (locktest's count, taken after the grant).
	noFencingToken bool
	// ended says the history has the run's end event, and interrupted
	// that it says the run was interrupted (see Cut); lastIndex is the
	// highest index of an event.
	ended, interrupted bool
	lastIndex          int
}

// keyToken names the grants of a key with one token.
type keyToken struct {
	key   string
	token int64
}

// lockerFailure is one failed attempt of a client to build its locker.
type lockerFailure struct {
	client string
	time   int64
	err    string
}

func newStoryData() *storyData {
	return &storyData{heal: -1, clients: map[histories.Process]string{}}
}

func (h *History) story() *storyData { return h.sd }

func paramInt(p histories.Params, name string) (int64, bool) {
	n, err := strconv.ParseInt(p[name], 10, 64)
	return n, err == nil
}

// event reads a nemesis record.
func (b *Builder) event(op histories.Op) {
	sd := b.h.sd
	v := op.Value
	if v == nil {
		v = &histories.Value{}
	}
	p, targets := v.Params, v.Targets
	// The key an event is about: its param, else the record's own.
	key := cmp.Or(p["key"], op.Key)
	sd.lastIndex = max(sd.lastIndex, op.Index)
	switch op.F {
	case histories.FStart:
		id := v.Fault + "|" + strings.Join(targets, ",")
		b.wins[id] = append(b.wins[id], len(sd.faults))
		sd.faults = append(sd.faults, Fault{Fault: v.Fault, Targets: b.targets(targets), Params: maps.Clone(p), Start: op.Time, Unended: true, Index: op.Index})
	case histories.FStop:
		// The earliest open window of the same fault on the same targets;
		// else of the same fault on any.
		id := v.Fault + "|" + strings.Join(targets, ",")
		if len(b.wins[id]) == 0 {
			id = ""
			for k, w := range b.wins {
				if strings.HasPrefix(k, v.Fault+"|") && len(w) > 0 && (id == "" || w[0] < b.wins[id][0]) {
					id = k
				}
			}
		}
		if w := b.wins[id]; len(w) > 0 {
			b.close(w[0], op.Time)
			f := &sd.faults[w[0]]
			for k, val := range p {
				if f.Params[k] != val {
					if f.Outcome == nil {
						f.Outcome = map[string]string{}
					}
					f.Outcome[k] = val
				}
			}
			b.wins[id] = w[1:]
		}
	case histories.FHeal:
		for k, w := range b.wins {
			for _, i := range w {
				b.close(i, op.Time)
			}
			delete(b.wins, k)
		}
		sd.heal = max(sd.heal, op.Time)
	case histories.FSetup:
		// What the run does (see Invariant), not a fault.
		sd.setup = maps.Clone(p)
		if sd.setup == nil {
			sd.setup = map[string]string{}
		}
		sd.ttl = 0
		if ttl, ok := paramInt(p, "ttl"); ok && ttl > 0 {
			sd.ttl = time.Duration(min(ttl, math.MaxInt64/int64(time.Second))) * time.Second
		}
		sd.backend, sd.recipe = p["backend"], p["recipe"]
		sd.noFencingToken = p["fencing_token"] == "false"
	case histories.FEnd: // the run's end, no fault (see Cut)
		sd.ended, sd.interrupted = true, p["interrupted"] == "true"
	case histories.FObserved:
		sd.observedAll = true
		if rev, ok := paramInt(p, "revision"); ok {
			sd.observed = max(sd.observed, rev)
		}
	case histories.FProcess:
		if n, ok := paramInt(p, "process"); ok && len(targets) == 1 {
			sd.clients[histories.Process(n)] = targets[0]
		}
	case histories.FKeyDeleted:
		tok, _ := paramInt(p, "create_revision")
		rev, _ := paramInt(p, "revision")
		d := Deletion{Key: key, Token: tok, Revision: rev, Lease: p["lease"], By: p["by"], Targets: b.targets(targets), Time: op.Time, Index: op.Index,
			leaseAlive: p["lease_alive"], releasedBy: p["released_by"], releasedToken: p["released_token"], owner: -1,
			node: p["node"], headOwn: p["head_own"]}
		d.headOwnRev, _ = paramInt(p, "head_own_revision")
		d.headSince, _ = paramInt(p, "head_since")
		if n, ok := paramInt(p, "process"); ok {
			d.owner = histories.Process(n)
		}
		sd.deletions = append(sd.deletions, d)
	case histories.FKeyKept:
		if n, ok := paramInt(p, "process"); ok {
			sd.kept = append(sd.kept, keyKept{key: key, process: histories.Process(n), time: op.Time, index: op.Index})
		}
	case histories.FKeySet:
		n, ok1 := paramInt(p, "process")
		set, ok2 := paramInt(p, "set_ns")
		ttl, ok3 := paramInt(p, "ttl_ms")
		if ok1 && ok2 && ok3 && ttl > 0 {
			ks := keySet{key: key, process: histories.Process(n), set: set, ttl: time.Duration(min(ttl, math.MaxInt64/int64(time.Millisecond))) * time.Millisecond, index: op.Index}
			for name, t := range map[string]*int64{"asked_ns": &ks.asked, "next_ns": &ks.next, "changed_ns": &ks.changed} {
				if *t = -1; p[name] != "" {
					*t, _ = paramInt(p, name)
				}
			}
			sd.sets = append(sd.sets, ks)
		}
	case histories.FLockerFailed:
		if len(targets) == 1 {
			sd.lockerFailed = append(sd.lockerFailed, lockerFailure{client: targets[0], time: op.Time, err: p["error"]})
		}
	case histories.FStall:
		// Not a fault, but shown with its span; promise 5 reads it.
		d, _ := paramInt(p, "duration_ns")
		st := Fault{Fault: op.F, Params: maps.Clone(p), Start: max(op.Time-max(d, 0), 0), End: op.Time, Index: op.Index}
		sd.stalls = append(sd.stalls, st)
		sd.others = append(sd.others, st)
	case histories.FStarved:
		d, _ := paramInt(p, "duration_ns")
		span, _ := paramInt(p, "span_ns")
		if len(targets) == 1 && span > 0 {
			sd.starved = append(sd.starved, starvedSpan{client: targets[0], process: p["process"], from: op.Time - span, to: op.Time, waited: time.Duration(min(d, span))})
		}
	case histories.FLeaseLost:
		tok, _ := paramInt(p, "token")
		sd.lost = append(sd.lost, leaseLost{key: key, token: tok, targets: b.targets(targets), time: op.Time, index: op.Index})
	default:
		sd.others = append(sd.others, Fault{Fault: cmp.Or(v.Fault, op.F), Targets: b.targets(targets), Params: maps.Clone(p), Start: op.Time, End: op.Time, Index: op.Index})
	}
}

// targets keeps an event's targets (the record's may be reused): one
// target, the most common, as a list shared by every event that names it.
func (b *Builder) targets(ts []string) []string {
	if len(ts) != 1 {
		return slices.Clone(ts)
	}
	one, ok := b.one[ts[0]]
	if !ok {
		one = []string{ts[0]}
		if len(b.one) < 4096 {
			b.one[ts[0]] = one
		}
	}
	return one
}

// close ends fault window i at t.
func (b *Builder) close(i int, t int64) {
	f := &b.h.sd.faults[i]
	f.End, f.Unended = max(t, f.Start), false
}

// finishEvents ends the windows still open at the history's end, and
// indexes them.
func (b *Builder) finishEvents() {
	sd := b.h.sd
	for i := range sd.faults {
		if sd.faults[i].Unended {
			sd.faults[i].End = max(b.h.end, sd.faults[i].Start)
		}
	}
	sd.byStart = make([]int, len(sd.faults))
	for i := range sd.byStart {
		sd.byStart[i] = i
	}
	slices.SortStableFunc(sd.byStart, func(i, j int) int { return cmp.Compare(sd.faults[i].Start, sd.faults[j].Start) })
	sd.endMax = make([]int64, len(sd.byStart))
	for k, i := range sd.byStart {
		sd.endMax[k] = sd.faults[i].End
		if k > 0 {
			sd.endMax[k] = max(sd.endMax[k], sd.endMax[k-1])
		}
	}
}

// beliefs derives who believed they held each lock when, and indexes them.
func (h *History) beliefs() []Belief {
	sd := h.sd
	var out []Belief
	holding := map[hold]*operation{}
	// A belief lasts from the grant to the release's invocation, even when
	// the client's session noticed the lease was gone: a client that does
	// not check goes on acting as the holder (the story tells when it
	// noticed).
	end := func(a *operation, to int64, how string) {
		out = append(out, Belief{Key: a.key, Process: int(a.process), Token: a.tok, HasToken: a.hasTok, From: a.ret, To: to, Ended: how, AcquireIndex: a.inv, grant: a})
	}
	for _, o := range h.ops {
		k := hold{o.process, o.key}
		switch {
		case o.f == histories.Acquire && o.status == histories.OK:
			if a := holding[k]; a != nil { // acquired again without releasing
				end(a, max(o.call, a.ret), "last-seen")
			}
			holding[k] = o
		case o.f == histories.Release:
			if a := holding[k]; a != nil {
				end(a, max(o.call, a.ret), "release")
				delete(holding, k)
			}
		}
	}
	for _, k := range sortedHolds(holding) {
		a := holding[k]
		end(a, max(h.alive[k.p], a.ret), "last-seen")
	}
	slices.SortStableFunc(out, func(a, b Belief) int { return cmp.Compare(a.From, b.From) })
	sd.byToken = make([]int32, 0, len(out))
	sd.byProcess = map[histories.Process][]int{}
	sd.toMax = make([]int64, len(out))
	for i, b := range out {
		b.grant.belief = int32(i)
		if b.HasToken {
			sd.byToken = append(sd.byToken, int32(i))
		}
		sd.byProcess[histories.Process(b.Process)] = append(sd.byProcess[histories.Process(b.Process)], i)
		sd.toMax[i] = b.To
		if i > 0 {
			sd.toMax[i] = max(sd.toMax[i], sd.toMax[i-1])
		}
	}
	slices.SortStableFunc(sd.byToken, func(i, j int32) int {
		return cmp.Or(cmp.Compare(out[i].Token, out[j].Token), cmp.Compare(out[i].Key, out[j].Key))
	})
	return out
}

// tokenBeliefs returns the beliefs of key's ("": any key's) grants of
// token, by start.
func (h *History) tokenBeliefs(key string, token int64) []int32 {
	bs, ix := h.sd.beliefs, h.sd.byToken
	from := func(k keyToken) int {
		i, _ := slices.BinarySearchFunc(ix, k, func(i int32, k keyToken) int {
			return cmp.Or(cmp.Compare(bs[i].Token, k.token), cmp.Compare(bs[i].Key, k.key))
		})
		return i
	}
	lo := from(keyToken{key, token})
	hi := lo
	for hi < len(ix) && bs[ix[hi]].Token == token && (key == "" || bs[ix[hi]].Key == key) {
		hi++
	}
	return ix[lo:hi]
}

// beliefBy finds the belief of process p in key's lock ("": any) that began
// last by t.
func (h *History) beliefBy(key string, p histories.Process, t int64) (Belief, bool) {
	bs := h.sd.byProcess[p]
	k, _ := slices.BinarySearchFunc(bs, t, func(i int, t int64) int {
		if h.sd.beliefs[i].From <= t {
			return -1
		}
		return 1
	})
	for k--; k >= 0; k-- {
		if b := h.sd.beliefs[bs[k]]; key == "" || b.Key == key {
			return b, true
		}
	}
	return Belief{}, false
}

// beliefsAt calls f with each belief in key's lock ("": any) held at t,
// latest begun first, while f returns true.
func (h *History) beliefsAt(key string, t int64, f func(Belief) bool) {
	sd := h.sd
	k, _ := slices.BinarySearchFunc(sd.beliefs, t, func(b Belief, t int64) int {
		if b.From <= t {
			return -1
		}
		return 1
	})
	for i := k - 1; i >= 0 && sd.toMax[i] >= t; i-- {
		if b := sd.beliefs[i]; b.To >= t && (key == "" || b.Key == key) && !f(b) {
			return
		}
	}
}

// faults returns the nemesis's fault windows.
func (h *History) faults() []Fault { return h.sd.faults }

// faultsDuring returns the faults active at some time in [from, to], in
// the order they started: the last maxFaults to start, if more.
func (h *History) faultsDuring(from, to int64) []Fault {
	sd := h.sd
	var out []Fault
	for k := sd.startedBy(to) - 1; k >= 0 && sd.endMax[k] >= from && len(out) < maxFaults; k-- {
		if f := sd.faults[sd.byStart[k]]; f.End >= from {
			out = append(out, f)
		}
	}
	slices.Reverse(out)
	return out
}

// maxFaults caps the faults a violation lists.
const maxFaults = 20

// startedBy returns how many faults started at t or before.
func (sd *storyData) startedBy(t int64) int {
	k, _ := slices.BinarySearchFunc(sd.byStart, t, func(i int, t int64) int {
		if sd.faults[i].Start <= t {
			return -1
		}
		return 1
	})
	return k
}

// faultDuring says whether a fault was active at some time in [from, to].
func (h *History) faultDuring(from, to int64) bool {
	k := h.sd.startedBy(to)
	return k > 0 && h.sd.endMax[k-1] >= from
}

// faultNear says whether a fault that could touch client c's session was
// active at some time in [from, to]: any fault but one whose targets are
// all other clients. A client's own faults (its pause, its cut, slowed or
// lossy links, its clock, its lease, its crash) reach its session alone;
// a member's, a partition's, or one whose targets the history does not
// name as clients, reach every session. With c unnamed, any fault.
func (h *History) faultNear(c string, from, to int64) bool {
	if !h.faultDuring(from, to) {
		return false
	}
	if c == "" {
		return true
	}
	named := map[string]bool{}
	for _, n := range h.sd.clients {
		named[n] = true
	}
	for _, f := range h.sd.faults {
		if f.Start > to || f.End < from {
			continue
		}
		others := len(f.Targets) > 0
		for _, t := range f.Targets {
			others = others && t != c && named[t]
		}
		if !others {
			return true
		}
	}
	return false
}

// stalled returns how long in all locktest's own process was not run in
// stalls that overlap [from, to], and the longest of them.
func (h *History) stalled(from, to int64) (total time.Duration, longest Fault) {
	for _, s := range h.sd.stalls {
		if s.Start <= to && s.End >= from {
			total = addSat(total, time.Duration(s.End-s.Start))
			if s.End-s.Start > longest.End-longest.Start {
				longest = s
			}
		}
	}
	return total, longest
}

// starvedSpan is a span in which a client's lock process waited to run
// for waited in all.
type starvedSpan struct {
	client, process string
	from, to        int64
	waited          time.Duration
}

// starvedFor returns how long in [from, to] the lock process of client c
// (or, where no process event named its client, "process N"'s) waited to
// run: each span's wait counted in the share of the span inside.
func (h *History) starvedFor(c string, from, to int64) time.Duration {
	var total time.Duration
	for _, s := range h.sd.starved {
		if s.client != c && "process "+s.process != c {
			continue
		}
		if in := min(s.to, to) - max(s.from, from); in > 0 {
			total = addSat(total, time.Duration(float64(s.waited)*float64(in)/float64(s.to-s.from)))
		}
	}
	return total
}

// revokedAt says whether a lease-revoke fault on the key's owner explains a
// deletion the observer could only attribute to the lease ending.
func (h *History) revokedAt(d Deletion) bool {
	// The nemesis records the start once the revoke returned, so the
	// observer may have seen the deletion first: a start within a second
	// either side.
	sd := h.sd
	for k := sd.startedBy(d.Time - int64(time.Second)); k < len(sd.byStart); k++ {
		f := sd.faults[sd.byStart[k]]
		if f.Start >= addSat(d.Time, int64(time.Second)) {
			break
		}
		if f.Fault == histories.FaultLeaseRevoke && slices.Equal(f.Targets, d.Targets) && (f.Params["lease"] == "" || f.Params["lease"] == d.Lease) {
			return true
		}
	}
	return false
}

// beliefOf finds the belief a grant started.
func (h *History) beliefOf(o *operation) (Belief, bool) {
	if o.granted == nil {
		return Belief{}, false
	}
	return h.sd.beliefs[o.belief], true
}

// holderOf finds the belief in which a process held a token of a key.
func (h *History) holderOf(key string, p histories.Process, token int64) (Belief, bool) {
	for _, i := range h.tokenBeliefs(key, token) {
		if b := h.sd.beliefs[i]; b.Process == int(p) {
			return b, true
		}
	}
	return Belief{}, false
}

// addSat adds two non-negative numbers (times, durations), saturating
// at the largest int64 rather than wrapping around.
func addSat[T ~int64](a, b T) T {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
