package checker

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/locktest/locktest/histories"
)

// Violation is one thing that went wrong, for results.json: who, which
// tokens, when, the faults active then, and the story in plain words.
type Violation struct {
	Check string `json:"check"`
	// Kind is "overlap" (two processes believed they held a lock at once),
	// "token-order" (a grant's token not above an earlier one),
	// "stale-write" (the resource accepted a lower token after a higher
	// one), "not-linearizable" (porcupine's verdict, with its window),
	// "stuck" (liveness) or "diverged" (consistency).
	Kind      string   `json:"kind"`
	Key       string   `json:"key,omitempty"`
	Processes []int    `json:"processes,omitempty"`
	Tokens    []int64  `json:"tokens,omitempty"`
	Members   []string `json:"members,omitempty"`
	// From and To bound the violation in history time (nanoseconds).
	From   int64   `json:"from_ns"`
	To     int64   `json:"to_ns"`
	Faults []Fault `json:"faults,omitempty"`
	// Window is, for porcupine's verdict, the part of the history it needed.
	Window *Window `json:"window,omitempty"`
	Story  string  `json:"story"`
}

// Window is a stretch of one key's history that porcupine checked on its own
// (a segment) and found not linearizable.
type Window struct {
	Key        string `json:"key"`
	From       int64  `json:"from_ns"`
	To         int64  `json:"to_ns"`
	FirstIndex int    `json:"first_index"`
	LastIndex  int    `json:"last_index"`
	Ops        int    `json:"ops"`
}

// Fault is a nemesis fault's window, from its "start" to its "stop" (or the
// final "heal", or the end of the history), or a point event.
type Fault struct {
	Fault   string            `json:"fault"`
	Targets []string          `json:"targets,omitempty"`
	Params  map[string]string `json:"params,omitempty"`
	Start   int64             `json:"start_ns"`
	End     int64             `json:"end_ns"`
	// Unended says no stop or heal ended it: it lasted to the history's end.
	Unended bool `json:"unended,omitempty"`
	Index   int  `json:"index"`
}

// Belief is an interval in which a process believed it held a key's lock:
// from its acquire's ok to its release's invocation, or to when its session
// noticed the lease was gone, or, without either, to when it was last seen
// acting.
type Belief struct {
	Key          string `json:"key"`
	Process      int    `json:"process"`
	Token        int64  `json:"token"`
	HasToken     bool   `json:"-"`
	From         int64  `json:"from_ns"`
	To           int64  `json:"to_ns"`
	Ended        string `json:"ended"` // "release" or "last-seen"
	AcquireIndex int    `json:"acquire_index"`
}

// Deletion is the server's truth that a lock key was deleted: a
// "key-deleted" nemesis event.
type Deletion struct {
	Key      string   `json:"key"`
	Token    int64    `json:"token"`              // the key's create revision
	Revision int64    `json:"revision,omitempty"` // of the delete; 0 if not recorded
	Lease    string   `json:"lease,omitempty"`
	By       string   `json:"by,omitempty"` // "release" | "expiry" | ...
	Targets  []string `json:"targets,omitempty"`
	Time     int64    `json:"time_ns"`
	Index    int      `json:"index"`
	// params are the event's other parameters (lease_alive, released_by,
	// released_token).
	params histories.Params
}

// Overlap is a pair of processes that believed they held the same lock at
// once.
type Overlap struct {
	Key    string `json:"key"`
	First  Belief `json:"first"`
	Second Belief `json:"second"`
	From   int64  `json:"from_ns"`
	To     int64  `json:"to_ns"`
}

// OverlapAnalysis is the overlap analysis beside porcupine.
type OverlapAnalysis struct {
	Beliefs   []Belief   `json:"beliefs"`
	Deletions []Deletion `json:"deletions"`
	Overlaps  []Overlap  `json:"overlaps"`
	// Truncated says more overlapping pairs exist than Overlaps holds.
	Truncated bool `json:"truncated,omitempty"`
}

// MaxOverlaps caps the overlapping pairs an analysis lists.
const MaxOverlaps = 1000

// Overlaps analyses a history's lock beliefs; see History.Overlaps.
func Overlaps(ops []histories.Op) OverlapAnalysis { return Build(ops).Overlaps() }

// Overlaps returns the intervals in which each process believed it held each
// lock, the server's deletions of lock keys where the history records them,
// and every pair of processes whose beliefs about one lock overlap (up to
// MaxOverlaps). Intervals touching at an instant do not overlap.
func (h *History) Overlaps() OverlapAnalysis {
	sd := h.story()
	a := OverlapAnalysis{Beliefs: sd.beliefs, Deletions: sd.deletions}
	byKey := map[string][]Belief{}
	for _, b := range sd.beliefs {
		byKey[b.Key] = append(byKey[b.Key], b)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		bs := byKey[k]
		slices.SortStableFunc(bs, func(x, y Belief) int { return cmp.Compare(x.From, y.From) })
		var active []Belief
		for _, b := range bs {
			active = slices.DeleteFunc(active, func(x Belief) bool { return x.To <= b.From })
			if b.To <= b.From {
				continue
			}
			for _, x := range active {
				if x.Process == b.Process {
					continue
				}
				if len(a.Overlaps) == MaxOverlaps {
					a.Truncated = true
					return a
				}
				a.Overlaps = append(a.Overlaps, Overlap{Key: k, First: x, Second: b, From: b.From, To: min(x.To, b.To)})
			}
			active = append(active, b)
		}
	}
	return a
}

// leaseLost is a "lease-lost" nemesis event.
type leaseLost struct {
	key     string
	token   int64
	targets []string
	time    int64
}

// storyData is what stories draw on, computed once per History.
type storyData struct {
	// clients names the client behind each process, from the workload's
	// "process" events.
	clients   map[histories.Process]string
	faults    []Fault
	heal      int64 // time of the last "heal"; -1 if none
	deletions []Deletion
	lost      []leaseLost
	beliefs   []Belief
	// lockerFailed are the times a client could not build its locker
	// (the recipe's New failed), from "locker-failed" events.
	lockerFailed []lockerFailure
	// ttl is the lease TTL from the setup event (0: not recorded);
	// observed the revision up to which the history holds every deletion
	// of a lock key (0: not recorded).
	ttl      time.Duration
	observed int64
}

// lockerFailure is one failed attempt of a client to build its locker.
type lockerFailure struct {
	client string
	time   int64
	err    string
}

func (h *History) story() *storyData {
	h.storyOnce.Do(func() { h.storyData = h.buildStory() })
	return h.storyData
}

// revokedAt says whether a lease-revoke fault on the key's owner explains a
// deletion the observer could only attribute to the lease ending.
func (h *History) revokedAt(d Deletion) bool {
	for _, f := range h.story().faults {
		// The nemesis records the start once the revoke returned, so the
		// observer may have seen the deletion first.
		if gap := d.Time - f.Start; f.Fault == histories.FaultLeaseRevoke && slices.Equal(f.Targets, d.Targets) && gap > -int64(time.Second) && gap < int64(time.Second) &&
			(f.Params["lease"] == "" || f.Params["lease"] == d.Lease) {
			return true
		}
	}
	return false
}

// who names a process in a story: "process 7 (c2)" when the history says
// which client it belongs to.
func (h *History) who(p histories.Process) string {
	if c, ok := h.story().clients[p]; ok {
		return fmt.Sprintf("process %d (%s)", p, c)
	}
	return fmt.Sprintf("process %d", p)
}

func param(v *histories.Value, name string) string {
	if v == nil {
		return ""
	}
	return v.Params[name]
}

func paramInt(v *histories.Value, name string) (int64, bool) {
	n, err := strconv.ParseInt(param(v, name), 10, 64)
	return n, err == nil
}

func (h *History) buildStory() *storyData {
	sd := &storyData{heal: -1, clients: map[histories.Process]string{}}
	open := map[string][]int{} // open fault windows by fault and targets
	closeAt := func(i int, t int64) {
		sd.faults[i].End = max(t, sd.faults[i].Start)
		sd.faults[i].Unended = false
	}
	for _, op := range h.nemesis {
		v := op.Value
		fault, targets := op.F, []string(nil)
		var params map[string]string
		if v != nil {
			if v.Fault != "" {
				fault = v.Fault
			}
			targets, params = v.Targets, v.Params
		}
		id := fault + "|" + strings.Join(targets, ",")
		switch {
		case op.F == histories.FStart || op.Type == histories.Invoke && op.F != histories.FStop && op.F != histories.FHeal:
			if op.F != histories.FStart { // an old-style invoke, completed by the same f
				id = "f|" + op.F
			}
			open[id] = append(open[id], len(sd.faults))
			sd.faults = append(sd.faults, Fault{Fault: fault, Targets: targets, Params: params, Start: op.Time, End: h.end, Unended: true, Index: op.Index})
		case op.F == histories.FStop:
			stack := open[id]
			if len(stack) == 0 { // the same fault with other targets
				for k, s := range open {
					if strings.HasPrefix(k, fault+"|") && len(s) > 0 {
						id, stack = k, s
						break
					}
				}
			}
			if len(stack) > 0 {
				closeAt(stack[0], op.Time)
				open[id] = stack[1:]
			}
		case op.F == histories.FHeal:
			for k, stack := range open {
				for _, i := range stack {
					closeAt(i, op.Time)
				}
				delete(open, k)
			}
			sd.heal = op.Time
		case op.F == histories.FSetup:
			// What the run does (see Invariant), not a fault.
			if ttl, ok := paramInt(v, "ttl"); ok && ttl > 0 {
				sd.ttl = time.Duration(ttl) * time.Second
			}
		case op.F == histories.FObserved:
			if rev, ok := paramInt(v, "revision"); ok {
				sd.observed = rev
			}
		case op.F == histories.FProcess:
			if p, ok := paramInt(v, "process"); ok && len(targets) == 1 {
				sd.clients[histories.Process(p)] = targets[0]
			}
		case op.F == histories.FKeyDeleted:
			tok, _ := paramInt(v, "create_revision")
			rev, _ := paramInt(v, "revision")
			sd.deletions = append(sd.deletions, Deletion{Key: param(v, "key"), Token: tok, Revision: rev, Lease: param(v, "lease"), By: param(v, "by"),
				Targets: targets, Time: op.Time, Index: op.Index, params: params})
		case op.F == histories.FLockerFailed:
			if len(targets) == 1 {
				sd.lockerFailed = append(sd.lockerFailed, lockerFailure{client: targets[0], time: op.Time, err: param(v, "error")})
			}
		case op.F == histories.FLeaseLost:
			tok, _ := paramInt(v, "token")
			sd.lost = append(sd.lost, leaseLost{key: param(v, "key"), token: tok, targets: targets, time: op.Time})
		default:
			if stack := open["f|"+op.F]; len(stack) > 0 { // completes an old-style invoke
				closeAt(stack[0], op.Time)
				open["f|"+op.F] = stack[1:]
				continue
			}
			sd.faults = append(sd.faults, Fault{Fault: fault, Targets: targets, Params: params, Start: op.Time, End: op.Time, Index: op.Index})
		}
	}
	// Beliefs.
	type pk struct {
		p   histories.Process
		key string
	}
	holding := map[pk]*operation{}
	// A belief lasts from the grant to the release's invocation, even when
	// the client's session noticed the lease was gone: a client that does
	// not check goes on acting as the holder (the story tells when it
	// noticed).
	end := func(a *operation, to int64, how string) {
		sd.beliefs = append(sd.beliefs, Belief{Key: a.key, Process: int(a.process), Token: a.tok, HasToken: a.hasTok, From: a.ret, To: to, Ended: how, AcquireIndex: a.inv})
	}
	for _, o := range h.ops {
		k := pk{o.process, o.key}
		switch {
		case o.f == histories.Acquire && o.status == histories.OK:
			if a := holding[k]; a != nil { // acquired again without releasing
				end(a, o.call, "last-seen")
			}
			holding[k] = o
		case o.f == histories.Release:
			if a := holding[k]; a != nil {
				end(a, o.call, "release")
				delete(holding, k)
			}
		}
	}
	rest := make([]pk, 0, len(holding))
	for k := range holding {
		rest = append(rest, k)
	}
	slices.SortFunc(rest, func(a, b pk) int { return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.p, b.p)) })
	for _, k := range rest {
		a := holding[k]
		end(a, max(h.alive[k.p], a.ret), "last-seen")
	}
	slices.SortStableFunc(sd.beliefs, func(a, b Belief) int { return cmp.Compare(a.From, b.From) })
	return sd
}

// faults returns the nemesis's fault windows.
func (h *History) faults() []Fault { return h.story().faults }

// faultsDuring returns the faults active at some time in [from, to].
func (h *History) faultsDuring(from, to int64) []Fault {
	var out []Fault
	for _, f := range h.faults() {
		if f.Start <= to && f.End >= from {
			out = append(out, f)
		}
	}
	return out
}

// phrase says what a fault did, in words.
func phrase(f Fault) string {
	t := strings.Join(f.Targets, ", ")
	if t == "" {
		t = "the cluster"
	}
	switch f.Fault {
	case "pause-client":
		return t + " was paused"
	case "pause-member":
		return "member " + t + " was paused"
	case "partition-leader":
		return "the leader " + t + " was partitioned away"
	case "isolate", "partition":
		return t + " was isolated"
	case "lease-starve":
		return "lease renewals of " + t + " were starved"
	case "lease-revoke":
		return "the lease of " + t + " was revoked"
	case "clock-bump":
		return "the clock of " + t + " was bumped"
	case "clock-strobe":
		return "the clock of " + t + " was strobed"
	case "clock-rate":
		return "the clock of " + t + " ran at a skewed rate"
	case "crash-member", "crash-leader", "crash-client", "kill":
		return t + " was crashed"
	case "slow":
		return "the network of " + t + " was slowed"
	}
	return fmt.Sprintf("fault %s on %s was active", f.Fault, t)
}

// describeFault is a fault's phrase with its times.
func (h *History) describeFault(f Fault) string {
	switch {
	case f.Start == f.End:
		return fmt.Sprintf("%s at %s", phrase(f), h.at(f.Start))
	case f.Unended:
		return fmt.Sprintf("%s from %s to the end", phrase(f), h.at(f.Start))
	}
	return fmt.Sprintf("%s %.2f-%s", phrase(f), float64(f.Start-h.origin())/1e9, h.at(f.End))
}

func (h *History) describeFaults(fs []Fault) string {
	var out []string
	for i, f := range fs {
		if i == 5 {
			out = append(out, fmt.Sprintf("and %d more", len(fs)-i))
			break
		}
		out = append(out, h.describeFault(f))
	}
	return strings.Join(out, "; ")
}

// faultNote is a visualization annotation for a fault window.
func (h *History) faultNote(f Fault) porcupine.Annotation {
	details := fmt.Sprintf("history index %d: %s", f.Index, h.describeFault(f))
	if len(f.Params) > 0 {
		keys := make([]string, 0, len(f.Params))
		for k := range f.Params {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var ps []string
		for _, k := range keys {
			ps = append(ps, k+"="+f.Params[k])
		}
		details += "; params " + strings.Join(ps, ", ")
	}
	desc := f.Fault
	if len(f.Targets) > 0 {
		desc += " " + strings.Join(f.Targets, ",")
	}
	return porcupine.Annotation{Tag: "nemesis", Start: f.Start, End: f.End, Description: desc, Details: details, BackgroundColor: "#fde2c8"}
}

// event is one step of a story.
type event struct {
	t    int64
	text string
}

// tell joins events in time order into one sentence.
func tell(lead string, evs []event) string {
	if len(evs) == 0 {
		return strings.TrimSuffix(strings.TrimSuffix(lead, "What happened: "), " ")
	}
	slices.SortStableFunc(evs, func(a, b event) int { return cmp.Compare(a.t, b.t) })
	var parts []string
	for _, e := range evs {
		if len(parts) > 0 && parts[len(parts)-1] == e.text {
			continue
		}
		parts = append(parts, e.text)
	}
	return lead + strings.Join(parts, "; ") + "."
}

// scene gathers the events around some holds of one key: their grants, the
// faults active, the server's deletions and lost leases of their tokens,
// their writes, and how each belief ended.
func (h *History) scene(key string, beliefs []Belief, writers []histories.Process, from, to int64) []event {
	sd := h.story()
	var evs []event
	tokens := map[int64]int{} // token → process
	procs := map[histories.Process]bool{}
	for _, p := range writers {
		procs[p] = true
	}
	for _, b := range beliefs {
		procs[histories.Process(b.Process)] = true
		if b.HasToken {
			tokens[b.Token] = b.Process
			evs = append(evs, event{b.From, fmt.Sprintf("%s acquired token %d at %s", h.who(histories.Process(b.Process)), b.Token, h.at(b.From))})
		} else {
			evs = append(evs, event{b.From, fmt.Sprintf("%s acquired the lock at %s", h.who(histories.Process(b.Process)), h.at(b.From))})
		}
		switch b.Ended {
		case histories.DeletedByRelease:
			evs = append(evs, event{b.To, fmt.Sprintf("%s released the lock at %s", h.who(histories.Process(b.Process)), h.at(b.To))})
		case "last-seen":
			evs = append(evs, event{b.To, fmt.Sprintf("%s was last seen acting as holder at %s", h.who(histories.Process(b.Process)), h.at(b.To))})
		}
	}
	for i, f := range h.faultsDuring(from, to) {
		if i == 5 {
			break
		}
		evs = append(evs, event{f.Start, h.describeFault(f)})
	}
	for _, d := range sd.deletions {
		p, ok := tokens[d.Token]
		if d.Key != key || !ok {
			continue
		}
		why := ""
		switch d.By {
		case histories.DeletedByExpiry:
			why = ": its lease expired on the server"
			if h.revokedAt(d) {
				why = ": the nemesis revoked its lease"
			}
		case histories.DeletedByRelease:
			why = ": released"
		case histories.DeletedByRevoke:
			why = ": its session was closed"
		case "acquire":
			why = ": cleaned up after a failed wait"
		case histories.DeletedByOther:
			why = ": another client's release deleted it"
		}
		evs = append(evs, event{d.Time, fmt.Sprintf("the server deleted %s's lock key (token %d) at %s%s", h.who(histories.Process(p)), d.Token, h.at(d.Time), why)})
	}
	for _, l := range sd.lost {
		if p, ok := tokens[l.token]; ok && l.key == key {
			evs = append(evs, event{l.time, fmt.Sprintf("%s's session noticed at %s that its lease was gone", h.who(histories.Process(p)), h.at(l.time))})
		}
	}
	// Writes of these processes to the key while the story lasts, in the
	// order they completed.
	var writes []*operation
	for _, o := range h.ops {
		if o.f != histories.Write || o.key != key || !procs[o.process] || o.call < from || o.call > to {
			continue
		}
		// Only the writes made under the grants the story is about: a
		// holder's later cycles would bury them.
		if _, told := tokens[o.tok]; len(tokens) > 0 && o.hasTok && !told {
			continue
		}
		writes = append(writes, o)
	}
	slices.SortStableFunc(writes, func(a, b *operation) int { return cmp.Compare(a.ret, b.ret) })
	var acc []*operation // accepted so far
	for _, o := range writes {
		tok := ""
		if o.hasTok {
			tok = fmt.Sprintf(" with token %d", o.tok)
		}
		switch o.status {
		case histories.OK:
			text := fmt.Sprintf("the resource accepted %s's write%s at %s", h.who(o.process), tok, h.at(o.ret))
			for _, a := range acc {
				if o.hasTok && a.hasTok && a.tok > o.tok && a.ret < o.call {
					text += fmt.Sprintf(", after %s's write with token %d at %s", h.who(a.process), a.tok, h.at(a.ret))
					break
				}
			}
			acc = append(acc, o)
			evs = append(evs, event{o.ret, text})
		case histories.Fail:
			evs = append(evs, event{o.ret, fmt.Sprintf("the resource rejected %s's write%s at %s", h.who(o.process), tok, h.at(o.ret))})
		default:
			evs = append(evs, event{o.call, fmt.Sprintf("%s's write%s invoked at %s had an unknown outcome", h.who(o.process), tok, h.at(o.call))})
		}
	}
	return evs
}

// overlapViolation tells the story of two processes holding a lock at once.
func (h *History) overlapViolation(o Overlap) Violation {
	a, b := o.First, o.Second
	to := max(a.To, b.To)
	v := Violation{Check: histories.CheckMutex, Kind: "overlap", Key: o.Key, Processes: []int{a.Process, b.Process},
		From: o.From, To: o.To, Faults: h.faultsDuring(a.From, to)}
	for _, x := range []Belief{a, b} {
		if x.HasToken {
			v.Tokens = append(v.Tokens, x.Token)
		}
	}
	lead := fmt.Sprintf("On key %q, %s and %s both believed they held the lock from %s to %s: ",
		o.Key, h.who(histories.Process(a.Process)), h.who(histories.Process(b.Process)), h.at(o.From), h.at(o.To))
	v.Story = tell(lead, h.scene(o.Key, []Belief{a, b}, nil, a.From, to))
	return v
}

// beliefOf finds the belief a grant started.
func (h *History) beliefOf(o *operation) (Belief, bool) {
	for _, b := range h.story().beliefs {
		if b.AcquireIndex == o.inv && b.Key == o.key && b.Process == int(o.process) {
			return b, true
		}
	}
	return Belief{}, false
}

// holderOf finds the belief in which a process held a token of a key.
func (h *History) holderOf(key string, p histories.Process, token int64) (Belief, bool) {
	for _, b := range h.story().beliefs {
		if b.Key == key && b.Process == int(p) && b.HasToken && b.Token == token {
			return b, true
		}
	}
	return Belief{}, false
}

// maxStories caps the direct violations a check tells.
const maxStories = 5

// mutexViolations finds overlapping holders and grants out of token order.
func (h *History) mutexViolations() []Violation {
	var out []Violation
	an := h.Overlaps()
	for i, o := range an.Overlaps {
		if i == maxStories {
			break
		}
		out = append(out, h.overlapViolation(o))
	}
	if n := len(an.Overlaps); n > maxStories {
		more := fmt.Sprintf("%d", n-maxStories)
		if an.Truncated {
			more = "at least " + more
		}
		out = append(out, Violation{Check: histories.CheckMutex, Kind: "overlap", Story: fmt.Sprintf("(%s more pairs of processes believed they held a lock at once.)", more)})
	}
	var grants []tokened
	for _, o := range h.ops {
		if o.f == histories.Acquire && o.status == histories.OK && o.hasTok {
			grants = append(grants, tokened{o, o.tok})
		}
	}
	if a, b, ok := regression(grants, true); ok {
		v := Violation{Check: histories.CheckMutex, Kind: "token-order", Key: b.o.key, Processes: []int{int(a.o.process), int(b.o.process)},
			Tokens: []int64{a.token, b.token}, From: a.o.ret, To: b.o.ret, Faults: h.faultsDuring(a.o.ret, b.o.ret)}
		lead := fmt.Sprintf("On key %q, %s was granted token %d at %s, after %s had been granted token %d at %s: tokens must grow with each grant. ",
			b.o.key, h.who(b.o.process), b.token, h.at(b.o.ret), h.who(a.o.process), a.token, h.at(a.o.ret))
		var bs []Belief
		for _, g := range []tokened{a, b} {
			if x, ok := h.beliefOf(g.o); ok {
				bs = append(bs, x)
			}
		}
		v.Story = tell(lead+"What happened: ", h.scene(b.o.key, bs, nil, a.o.ret, b.o.ret))
		out = append(out, v)
	}
	return out
}

// staleWriteViolation tells the story of the resource accepting a write with
// a lower token after one with a higher token.
func (h *History) staleWriteViolation(a, b tokened) Violation {
	av, _ := a.o.value()
	bv, _ := b.o.value()
	v := Violation{Check: histories.CheckResource, Kind: "stale-write", Key: b.o.key, Processes: []int{int(b.o.process), int(a.o.process)},
		Tokens: []int64{b.token, a.token}, From: a.o.ret, To: b.o.ret}
	lead := fmt.Sprintf("On key %q, the resource accepted %s's write of %d with token %d (invoked %s, accepted %s), although %s's write of %d with the higher token %d had been accepted by %s. ",
		b.o.key, h.who(b.o.process), bv, b.token, h.at(b.o.call), h.at(b.o.ret), h.who(a.o.process), av, a.token, h.at(a.o.ret))
	var bs []Belief
	from, to := a.o.call, b.o.ret
	for _, w := range []tokened{b, a} {
		if x, ok := h.holderOf(w.o.key, w.o.process, w.token); ok {
			bs = append(bs, x)
			from = min(from, x.From)
		}
	}
	v.Faults = h.faultsDuring(from, to)
	v.Story = tell(lead+"What happened: ", h.scene(b.o.key, bs, []histories.Process{a.o.process, b.o.process}, from, to))
	return v
}
