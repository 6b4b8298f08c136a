// The invariant check: the application's numbers, counted from the history.

package checker

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/words"
)

// The invariant check: what the application behind the lock cares about,
// counted from the history alone. The run's "setup" nemesis event says what
// the critical section did (params workload and items); without one, the
// history is taken for the counter workload.
//
//   - counter: a client reads the value and writes value+1. Every accepted
//     write (write ok) should add one, so the final value should equal the
//     number of accepted writes, or exceed it by at most the writes whose
//     outcome is unknown. A lower final value means updates were lost: two
//     holders read the same value, or a stale write set the value back.
//   - stock: each key has an inventory of items; the resource holds the
//     number sold. A client reads it and, if it is below items, writes it
//     +1: a sale, counted when the write is accepted. Sales must never
//     exceed items (oversold), and the final stock must be items minus the
//     sales (else sales were lost from the count, and the stock shows items
//     that are gone).
//
// The final value of a key is its last read ok invoked after every write of
// the key was invoked, and after every write with a known outcome returned:
// the workload makes one such read of each key when the run stops.
//
// The counts hold only for the workload's own writes, and from a known
// start. So each write must be the value its process last read, plus one;
// and the value before the
// first write is 0 in a history a run recorded (its setup event: the
// resource starts empty), else the value reads returned before any write
// was invoked. Where either is not so, the key's invariant is not judged,
// and the check says why.

// InvariantCount is the invariant check's accounting of one key.
type InvariantCount struct {
	Key      string `json:"key"`
	Workload string `json:"workload"`
	// Items is the stock workload's inventory.
	Items int64 `json:"items,omitempty"`
	// Accepted counts the writes the resource accepted (write ok, or by its
	// own log): in the stock workload, the sales. Unknown counts writes
	// whose outcome is unknown, Rejected those refused or, by the
	// resource's log, never accepted.
	Accepted int64 `json:"accepted"`
	Unknown  int64 `json:"unknown"`
	Rejected int64 `json:"rejected"`
	// Final is the final value (the number sold, for stock), if HasFinal.
	Final    int64 `json:"final"`
	HasFinal bool  `json:"has_final"`
	// Lost counts accepted writes the final value does not reflect (at
	// least; lost sales for stock); Oversold the sales beyond the
	// inventory (at least). Excess is a final value above every write that
	// may have been applied.
	Lost     int64 `json:"lost"`
	Oversold int64 `json:"oversold,omitempty"`
	Excess   int64 `json:"excess,omitempty"`
	// Unapplied counts unknown writes the final value shows did not take
	// effect: the only unknown write, invoked after every other write
	// returned, would have been the last applied and so the final value.
	Unapplied int64 `json:"unapplied,omitempty"`
	// Base is the value before the first write (0 in a recorded run).
	Base int64 `json:"base,omitempty"`
	// Undecided says why the key's counts cannot be judged ("": they
	// can): a start that is not known, or writes that are not the
	// workload's.
	Undecided string `json:"undecided,omitempty"`
}

// Invariant checks a history; see History.Invariant.
func Invariant(ops []histories.Op) Result { return Build(ops).Invariant() }

// setup returns the run's workload and stock inventory, from its setup
// event (the last, if several), and whether there was one.
func (h *History) setup() (workload string, items int64, hasItems, recorded bool) {
	workload = histories.WorkloadCounter
	p := h.sd.setup
	if w := p["workload"]; w != "" {
		workload = w
	}
	items, hasItems = paramInt(p, "items")
	return workload, items, hasItems, p != nil
}

// InvariantCounts returns the invariant check's accounting of each key, in
// key order.
func (h *History) InvariantCounts() []InvariantCount {
	workload, items, hasItems, recorded := h.setup()
	// What the workload's invariant is, if this checker knows it.
	unknownWorkload := ""
	switch {
	case workload != histories.WorkloadCounter && workload != histories.WorkloadStock:
		unknownWorkload = fmt.Sprintf("the setup event names workload %q, whose invariant this checker does not know", workload)
	case workload == histories.WorkloadStock && !hasItems:
		unknownWorkload = "the setup event names the stock workload but not its items"
	}
	type keyOps struct {
		writes, reads []*operation
		// odd is the first write that is not the workload's.
		odd string
	}
	byKey := map[string]*keyOps{}
	get := func(k string) *keyOps {
		if byKey[k] == nil {
			byKey[k] = &keyOps{}
		}
		return byKey[k]
	}
	// The value each process last read of each key, as the operations
	// were invoked (a process's read returned before its next invocation).
	type read struct {
		val int64
		ok  bool
	}
	lastRead := map[hold]read{}
	for _, o := range h.ops {
		ko := get(o.key)
		switch o.f {
		case histories.Write:
			ko.writes = append(ko.writes, o)
			r := lastRead[hold{o.process, o.key}]
			if ko.odd != "" {
				break
			}
			switch {
			case !o.hasVal:
				ko.odd = fmt.Sprintf("%s's write at %s carries no value", h.who(o.process), h.at(o.call))
			case !r.ok:
				ko.odd = fmt.Sprintf("%s wrote %d at %s without reading the value first", h.who(o.process), o.val, h.at(o.call))
			case r.val == math.MaxInt64 || o.val != r.val+1:
				ko.odd = fmt.Sprintf("%s wrote %d at %s, not one more than the %d it had read", h.who(o.process), o.val, h.at(o.call), r.val)
			}
		case histories.Read:
			ko.reads = append(ko.reads, o)
			if o.status == histories.OK && o.hasVal {
				lastRead[hold{o.process, o.key}] = read{o.val, true}
			}
		}
	}
	keys := make([]string, 0, len(byKey))
	for k, ko := range byKey {
		if len(ko.writes)+len(ko.reads) > 0 {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []InvariantCount
	for _, k := range keys {
		ko := byKey[k]
		c := InvariantCount{Key: k, Workload: workload}
		if workload == histories.WorkloadStock {
			c.Items = items
		}
		var lastCall, lastKnownRet int64 = -1, -1
		firstCall := int64(math.MaxInt64)
		for _, w := range ko.writes {
			lastCall = max(lastCall, w.call)
			firstCall = min(firstCall, w.call)
			switch w.status {
			case histories.OK:
				c.Accepted++
				lastKnownRet = max(lastKnownRet, w.ret)
			case histories.Fail:
				c.Rejected++
				lastKnownRet = max(lastKnownRet, w.ret)
			default:
				switch { // the resource's log says what; when, it does not
				case w.applied:
					c.Accepted++
					continue
				case w.lost:
					c.Rejected++
					continue
				}
				c.Unknown++
			}
		}
		// The start: a recorded run's resource starts empty; else what
		// reads before any write returned, if they agree.
		if !recorded {
			var seen []int64
			for _, r := range ko.reads {
				if r.status == histories.OK && r.hasVal && r.ret < firstCall && !slices.Contains(seen, r.val) {
					seen = append(seen, r.val)
				}
			}
			switch {
			case len(seen) == 1:
				c.Base = seen[0]
			case len(seen) > 1:
				c.Undecided = fmt.Sprintf("reads before the first write returned %d different values, so the value before it is not known", len(seen))
			case len(ko.writes) > 0:
				c.Undecided = "the history has no setup event (a run's resource starts at 0) and no read before the first write, so the value before it is not known"
			}
		}
		if ko.odd != "" {
			c.Undecided = ko.odd + ": the invariant counts the workload's own writes (read a value, write it plus one)"
		}
		if unknownWorkload != "" {
			c.Undecided = unknownWorkload
		}
		var final *operation
		for _, r := range ko.reads {
			if r.status != histories.OK || !r.hasVal || r.call <= lastCall || r.call < lastKnownRet {
				continue
			}
			if final == nil || r.call > final.call {
				final = r
			}
		}
		if final != nil && c.Unknown == 1 {
			var last *operation
			for _, w := range ko.writes {
				if w.unknown() && !w.applied && !w.lost {
					last = w
				}
			}
			alone := true
			for _, w := range ko.writes {
				alone = alone && (w == last || w.ret < last.call)
			}
			if alone && last.hasVal && last.val != final.val {
				c.Unapplied = 1
			}
		}
		if final != nil {
			c.Final, c.HasFinal = final.val, true
			net := subSat(c.Final, c.Base) // what the writes added
			c.Lost = max(0, subSat(c.Accepted, net))
			c.Excess = max(0, subSat(net, c.Accepted+c.Unknown))
		}
		if workload == histories.WorkloadStock {
			c.Oversold = max(0, subSat(addSigned(c.Base, c.Accepted), items))
		}
		out = append(out, c)
	}
	return out
}

// addSigned adds two numbers, saturating rather than wrapping around.
func addSigned(a, b int64) int64 {
	c := a + b
	if (c > a) != (b > 0) {
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return c
}

// subSat subtracts b from a, saturating rather than wrapping around.
func subSat(a, b int64) int64 {
	if b == math.MinInt64 {
		if a >= 0 {
			return math.MaxInt64
		}
		return a - b
	}
	return addSigned(a, -b)
}

// Invariant checks the application's invariant, counted from the history:
// for the counter workload that no accepted update was lost; for the stock
// workload that no item was sold twice over (oversold) and that the final
// stock is the inventory minus the sales. It is invalid if any key breaks
// it, unknown if some key has no final read to judge by, and valid
// otherwise. Its explanation gives the numbers.
func (h *History) Invariant() Result {
	began := time.Now()
	res := Result{Name: histories.CheckInvariant, Verdict: Unknown}
	if h.err != nil {
		res.Explanation = "The history is malformed: " + h.err.Error() + "."
		return res
	}
	counts := h.InvariantCounts()
	res.Keys = len(counts)
	if len(counts) == 0 {
		res.Explanation = "The history has no read or write operations: there is nothing to judge."
		res.Duration = time.Since(began)
		return res
	}
	for _, o := range h.ops {
		if o.f == histories.Write || o.f == histories.Read {
			res.Ops++
			if o.f == histories.Write && o.unknown() {
				res.Unknown++
			}
		}
	}
	var undecided []string
	for _, c := range counts {
		if c.Undecided != "" {
			undecided = append(undecided, fmt.Sprintf("On key %q the invariant cannot be judged: %s.", c.Key, c.Undecided))
			continue
		}
		vs := h.invariantViolations(c)
		res.Violations = append(res.Violations, vs...)
		switch {
		case !c.HasFinal && c.Oversold == 0:
			undecided = append(undecided, fmt.Sprintf("On key %q no read followed the last write, so the final value is unknown (%s).", c.Key, describeCount(c)))
		case len(vs) == 0:
			if why := hiddenByUnknown(c); why != "" {
				undecided = append(undecided, why)
			}
		}
	}
	var lines []string
	for _, v := range res.Violations {
		lines = append(lines, v.Story)
	}
	switch {
	case len(res.Violations) > 0:
		res.Verdict = Invalid
		lines = append(lines, undecided...)
	case len(undecided) > 0:
		lines = undecided
	default:
		res.Verdict = Valid
	}
	res.Explanation = joinLines(lines...)
	res.Duration = time.Since(began)
	return res
}

// hiddenByUnknown says, in numbers, how writes of unknown outcome could
// hide a broken invariant on a key whose counts show none, or "" if they
// cannot. Each such write may or may not have taken effect: if it did and
// the final value does not show it, an update was lost; a sale that did
// may have sold beyond the stock.
func hiddenByUnknown(c InvariantCount) string {
	unknown := c.Unknown - c.Unapplied
	if unknown == 0 {
		return ""
	}
	unseen := subSat(c.Accepted+unknown, subSat(c.Final, c.Base)) // writes that may have taken effect but do not show
	var whys []string
	if c.HasFinal && unseen > 0 {
		whys = append(whys, fmt.Sprintf("the final value %d shows %s fewer than the %d that may have taken effect: if %s, %s lost",
			c.Final, words.Count(unseen, "write", "writes"), c.Accepted+unknown, words.Form(unseen, "it did", "they did"), words.Form(unseen, "an update was", "updates were")))
	}
	if c.Workload == histories.WorkloadStock && c.Accepted+unknown > c.Items {
		whys = append(whys, fmt.Sprintf("%d accepted sales plus %d of unknown outcome exceed the %d items: if they took effect, items were oversold",
			c.Accepted, unknown, c.Items))
	}
	if len(whys) == 0 {
		return ""
	}
	return fmt.Sprintf("On key %q, %s had unknown outcomes, and the history cannot tell whether they hide a broken invariant: %s.",
		c.Key, words.Count(unknown, "write", "writes"), strings.Join(whys, "; "))
}

// describeCount gives a key's numbers in words.
func describeCount(c InvariantCount) string {
	what := "writes"
	if c.Workload == histories.WorkloadStock {
		what = "sales"
	}
	s := fmt.Sprintf("%d %s accepted", c.Accepted, what)
	if c.Workload == histories.WorkloadStock {
		s = fmt.Sprintf("%d items, %d sales accepted", c.Items, c.Accepted)
	}
	if c.Unknown > 0 {
		s += fmt.Sprintf(", %d with unknown outcomes", c.Unknown)
	}
	if c.Rejected > 0 {
		s += fmt.Sprintf(", %d writes rejected", c.Rejected)
	}
	return s
}

// invariantViolations tells what is wrong with one key, if anything.
func (h *History) invariantViolations(c InvariantCount) []Violation {
	var out []Violation
	stock := c.Workload == histories.WorkloadStock
	unknown := ""
	if c.Unknown > 0 {
		unknown = fmt.Sprintf(" (possibly more: %s had unknown outcomes)", words.Count(c.Unknown, "write", "writes"))
	}
	if stock && c.Oversold > 0 {
		v := Violation{Check: histories.CheckInvariant, Kind: "oversold", Key: c.Key}
		v.Story = fmt.Sprintf("On key %q, the resource accepted %d sales of %d items: %d oversold%s.",
			c.Key, c.Accepted, c.Items, c.Oversold, unknown)
		h.invariantScene(&v, c.Key)
		out = append(out, v)
	}
	if c.HasFinal && c.Lost > 0 {
		v := Violation{Check: histories.CheckInvariant, Kind: "lost-update", Key: c.Key}
		if stock {
			due := fmt.Sprintf(", where %d was due", c.Items-c.Accepted)
			if c.Accepted > c.Items {
				due = ""
			}
			v.Story = fmt.Sprintf("On key %q, %d sales were accepted but the stock fell by only %d (final stock %d of %d items%s): %s lost from the count, and the stock shows %s.",
				c.Key, c.Accepted, c.Final, c.Items-c.Final, c.Items, due, words.Count(c.Lost, "sale was", "sales were"), words.Count(c.Lost, "item that is gone", "items that are gone"))
		} else {
			final := fmt.Sprintf("%d", c.Final)
			if c.Base != 0 {
				final += fmt.Sprintf(" (from %d before the first write)", c.Base)
			}
			v.Story = fmt.Sprintf("On key %q, %d writes were accepted but the final value is %s: %s lost.",
				c.Key, c.Accepted, final, words.Count(c.Lost, "update was", "updates were"))
		}
		h.invariantScene(&v, c.Key)
		out = append(out, v)
	}
	if c.HasFinal && c.Excess > 0 {
		v := Violation{Check: histories.CheckInvariant, Kind: "excess", Key: c.Key}
		from := ""
		if c.Base != 0 {
			from = fmt.Sprintf(" above the %d before the first write", c.Base)
		}
		v.Story = fmt.Sprintf("On key %q, the final value is %d, more%s than the %d writes that may have taken effect (%d accepted, %d unknown): something else wrote to the resource.",
			c.Key, c.Final, from, c.Accepted+c.Unknown, c.Accepted, c.Unknown)
		out = append(out, v)
	}
	return out
}

// invariantScene adds to v the first moment the key's value went backwards
// or stood still under an accepted write (the write that lost updates), with
// the processes, tokens and faults then.
func (h *History) invariantScene(v *Violation, key string) {
	var acc []*operation
	for _, o := range h.ops {
		if o.f == histories.Write && o.key == key && o.status == histories.OK && o.hasVal {
			acc = append(acc, o)
		}
	}
	slices.SortStableFunc(acc, func(a, b *operation) int { return cmp.Compare(a.ret, b.ret) })
	// best[i] is the write of the highest value among acc[:i+1].
	best := make([]*operation, len(acc))
	for i, o := range acc {
		best[i] = o
		if i > 0 && best[i-1].val >= o.val {
			best[i] = best[i-1]
		}
	}
	for _, o := range acc {
		// The highest value accepted definitely before o was invoked.
		var prev *operation
		if k, _ := slices.BinarySearchFunc(acc, o.call, func(a *operation, t int64) int {
			if a.ret < t {
				return -1
			}
			return 1
		}); k > 0 {
			prev = best[k-1]
		}
		if prev == nil || o.val > prev.val {
			continue
		}
		v.Processes = []int{int(o.process), int(prev.process)}
		if o.hasTok && prev.hasTok {
			v.Tokens = []int64{o.tok, prev.tok}
		}
		v.From, v.To = prev.ret, o.ret
		v.Faults = h.faultsDuring(o.call, o.ret)
		tok := func(x *operation) string {
			if x.hasTok {
				return fmt.Sprintf(" with token %d", x.tok)
			}
			return ""
		}
		s := fmt.Sprintf(" The first lost update: the resource accepted %s's write of %d%s at %s, although %s's write of %d%s had been accepted at %s",
			h.who(o.process), o.val, tok(o), h.at(o.ret), h.who(prev.process), prev.val, tok(prev), h.at(prev.ret))
		switch {
		case o.hasTok && prev.hasTok && o.tok < prev.tok:
			s += ": a stale write, with a lower token"
		case o.val == prev.val:
			s += ": both had read the same value"
		default:
			s += ": it set the value back"
		}
		if len(v.Faults) > 0 {
			s += "; faults active then: " + h.describeFaults(v.Faults)
		}
		v.Story += s + "."
		return
	}
}

// invariantCut is the invariant's rule for a history cut short: it needs
// the value the run left, read at its end.
func invariantCut(h *History, r Result, c *Cut, _ time.Duration) string {
	if r.Verdict == Valid {
		return fmt.Sprintf("The run was cut short at %s, before its final reads: the value it left is not known, so a lost update cannot be ruled out.", h.at(c.Time))
	}
	return ""
}
