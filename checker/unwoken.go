// The liveness check's unwoken waiters: a client whose node headed its
// lock's queue, nothing ahead of it and nothing in its way, and which was
// not granted the lock.

package checker

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/locktest/locktest/histories"
)

// unwoken finds, from the server's truth (ZooKeeper's observer: a node's
// head_since, the deletion after which every older node of its lock was
// gone), each node never granted that headed its lock's queue while its
// owner's acquire still waited, for at least a TTL (unwokenFor) with no
// fault that could reach the owner's session, nor the settling after one
// (settled), and locktest's own process running throughout (no stall
// event then): the owner was never told
// it had the lock. A correct queue lock grants the head of its queue as
// soon as the node before it goes: one watch event and one listing, a few
// milliseconds; a TTL is the ZooKeeper session's timeout, the longest a
// client keeps its session without hearing from its servers. WriteLock's
// lost watch is one (shayhatsor/zookeeper#26: its exists on the node
// before its own came after that node went, and left a watch for a node
// that never comes back): its waiter stalls the lock until its acquire
// gives up, 4 s under power's defaults, under the liveness bound, and
// whenever it happens, faults or not, so the idle rule cannot see it.
//
// Faults excuse only what they could delay: a fault on another client
// cannot stop the servers from waking the head's owner, and the time the
// owner's session may take to settle after its own fault (or a member's)
// is left out. Judged only where every grant of the history names its
// claim (granted).
func (h *History) unwoken(granted map[[2]string]bool) []Violation {
	sd := h.story()
	if sd.ttl == 0 {
		return nil
	}
	var out []Violation
	for _, d := range sd.deletions {
		if d.headSince == 0 || d.node == "" || d.owner < 0 || d.By == histories.DeletedByRelease || granted[[2]string{d.Key, d.node}] {
			continue
		}
		i := slices.IndexFunc(sd.deletions, func(e Deletion) bool { return e.Key == d.Key && e.Revision == d.headSince })
		if i < 0 {
			continue
		}
		from := sd.deletions[i].Time
		// A later node of the same session, there after d headed the
		// queue: d is an earlier acquire's, left in line (the ghost's or
		// the orphan's, told there), not the node the acquire waited on.
		if d.Lease != "" && slices.ContainsFunc(sd.deletions, func(e Deletion) bool {
			return e.Key == d.Key && e.Lease == d.Lease && e.Token > d.Token && e.Time > from
		}) {
			continue
		}
		// The owner's acquire waiting then, not granted: its node's.
		var a *operation
		for _, o := range h.ops {
			if o.process == d.owner && o.f == histories.Acquire && o.key == d.Key && o.call <= from && (o.missing || o.ret > from) {
				a = o
			}
		}
		if a == nil || a.status == histories.OK {
			continue
		}
		to := d.Time
		if !a.missing {
			to = min(to, a.ret)
		}
		c := sd.clients[d.owner]
		calm, ok := h.settled(c, from, to)
		if !ok {
			continue
		}
		// A host that starved locktest's process then may have starved
		// the lock's, which locktest does not watch, longer.
		if stalled, _ := h.stalled(calm, to); stalled > 0 || time.Duration(to-calm) < unwokenFor(sd.ttl) {
			continue
		}
		out = append(out, h.unwokenStory(d, sd.deletions[i], a, from, calm, to))
	}
	return out
}

// unwokenFor is how long a node must head its lock's queue, calm, for its
// owner not granted to be unwoken: the session's timeout (the TTL). The
// lost watch of WriteLock stalled its waiter at the head for about 3 s of
// its 4-5 s acquire; a correct lock is granted there within milliseconds.
func unwokenFor(ttl time.Duration) time.Duration { return ttl }

// settled returns when, from from on, the faults that could reach client
// c's session (faultNear's: its own and those on the cluster; any fault,
// c unnamed) had stopped and settled, until to; false if one never ended.
// After a cut, a pause, a member's crash, its client reconnects within its
// session's timeout (a TTL) or loses the session, and its node with it;
// after a slow link of latency alone, whose requests never went unanswered
// past the client's read timeout (latency and jitter under TTL/4: pings go
// every TTL/3, the read timeout is 2/3 of it), the requests it delayed
// arrive within twice its latency and jitter.
func (h *History) settled(c string, from, to int64) (int64, bool) {
	named := map[string]bool{}
	for _, n := range h.sd.clients {
		named[n] = true
	}
	calm := from
	for _, f := range h.sd.faults {
		if f.Start > to {
			continue
		}
		if f.Unended {
			return 0, false
		}
		others := c != "" && len(f.Targets) > 0
		for _, t := range f.Targets {
			others = others && t != c && named[t]
		}
		if !others {
			calm = max(calm, addSat(f.End, int64(h.settle(f))))
		}
	}
	return calm, calm < to
}

// settle is how long after fault f a client's session may take to settle
// (see settled).
func (h *History) settle(f Fault) time.Duration {
	ttl := h.sd.ttl
	if f.Fault != "slow" || f.Params["toxic"] != "latency" {
		return ttl
	}
	l, err1 := time.ParseDuration(f.Params["latency"])
	j, err2 := time.ParseDuration(cmp.Or(f.Params["jitter"], "0s"))
	if err1 != nil || err2 != nil || l < 0 || j < 0 || l+j >= ttl/4 {
		return ttl
	}
	return 2 * (l + j)
}

// unwokenStory tells of node d, head of its lock's queue from from (when
// e went), while its owner's acquire a waited, calm from calm to to.
func (h *History) unwokenStory(d, e Deletion, a *operation, from, calm, to int64) Violation {
	v := Violation{Check: histories.CheckLiveness, Kind: "unwoken", Key: d.Key, Processes: []int{int(d.owner)}, From: from, To: to,
		Faults: h.faultsDuring(from, to)}
	who := fmt.Sprintf("Process %d", d.owner)
	if c := h.sd.clients[d.owner]; c != "" {
		who = fmt.Sprintf("Client %s (process %d)", c, d.owner)
	}
	end := "was still waiting when the history ended"
	switch {
	case a.missing:
	case a.status == histories.Fail:
		end = "was refused at " + h.at(a.ret)
	default:
		end = "ended without an answer at " + h.at(a.ret)
	}
	if err := h.errs[a]; err != "" && !a.missing {
		end += " (" + err + ")"
	}
	v.Story = fmt.Sprintf("%s asked for lock %q at %s; its node %s (created at revision %d, never granted) headed the lock's queue from %s at the latest, when %s went (revision %d), "+
		"and stayed there while the acquire waited: it %s. From %s to %s, %s, no fault could reach its session and locktest's own process ran, the lock free for it, "+
		"yet it was never granted: a correct queue lock grants the head of its queue within milliseconds, and this one was never woken "+
		"(such as a watch set on the node before its own after that node had gone: it waits for a node that never comes back)",
		who, d.Key, h.at(a.call), d.node, d.Token, h.at(from), cmp.Or(e.node, "the node before it"), e.Revision, end, h.at(calm), h.at(to),
		time.Duration(to-calm).Round(time.Millisecond))
	if len(v.Faults) > 0 {
		v.Story += "; faults active in its time at the head: " + h.describeFaults(v.Faults)
	}
	v.Story += "."
	return v
}
