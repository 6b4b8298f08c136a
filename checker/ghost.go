// The liveness check's ghosts, a client that gave up waiting behind a node
// of its own in its lock's queue, a node it did not know it had; and its
// orphans, a node a definite refusal left in line (and, in unwoken.go, its
// unwoken waiters).

package checker

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/locktest/locktest/histories"
)

// ghosts finds, from the server's truth (ZooKeeper's observer), each node a
// client left in its lock's queue without knowing it had it: the owner's
// clean-up after an acquire that gave up deleted its own node, never
// granted, while the head of the queue was an older node of the same
// session, never granted either (the observer's head_own), and that older
// node went only when the session ended (closed or expired), never by a
// delete of the client's. A correct queue lock makes one node per acquire
// and deletes it when the acquire gives up; a client waiting behind its own
// node waits until it gives up, and nobody holds the lock or can be granted
// it while that node heads the queue: no fault explains that, whenever it
// happens (ZOOKEEPER-1262's ghost after a lost create reply, kazoo#732's
// orphan after a swallowed clean-up error).
//
// Judged only where every grant of the history names its claim (the node
// it holds): the observer knows a node was granted only by that name.
func (h *History) ghosts() []Violation {
	sd := h.story()
	granted := map[[2]string]bool{} // lock, node
	for _, o := range h.ops {
		if o.f != histories.Acquire || o.status != histories.OK {
			continue
		}
		if !o.keyed() {
			return nil
		}
		granted[[2]string{o.key, o.claim[strings.LastIndexByte(o.claim, '/')+1:]}] = true
	}
	var out []Violation
	told := map[[2]string]bool{} // lock, node: a ghost told
	for _, d := range sd.deletions {
		if d.By != histories.DeletedByAcquire || d.headOwn == "" || d.Lease == "" || granted[[2]string{d.Key, d.headOwn}] {
			continue
		}
		i := slices.IndexFunc(sd.deletions, func(e Deletion) bool {
			return e.Key == d.Key && e.node == d.headOwn && e.Lease == d.Lease
		})
		if i < 0 {
			continue // still there when the history ended: not known to go by the session's end
		}
		end := sd.deletions[i]
		if end.By != histories.DeletedByRevoke && end.By != histories.DeletedByExpiry || end.Revision <= d.Revision {
			continue
		}
		out = append(out, h.ghostStory(d, end))
		told[[2]string{d.Key, d.headOwn}] = true
	}
	out = append(out, h.orphans(granted, told)...)
	return append(out, h.unwoken(granted)...)
}

// orphans finds, from the server's truth, each node a client's acquire
// left in its lock's queue after the client was told, definitely, that the
// acquire had failed: a node never granted that was still in line when a
// later node of the same session was created, and that went only when the
// session ended. A definite refusal promises that the acquire holds
// nothing, its node removed first (the exec protocol's definite), and
// locktest keeps a session after a definite refusal only (an unknown
// outcome ends it; a built-in recipe's locker goes after any refusal): with one node per acquire (see ghosts), the older
// node is an earlier acquire's, not granted and not the session's last,
// so refused definitely; yet it stayed in line, where it stalls every
// later waiter until its session ends (kazoo#732's orphan, its clean-up's
// error swallowed). No fault explains it, whenever it happens: a fault can
// make a clean-up fail, but then the refusal is not definite. Told only
// with the owner's process's last definite refusal of the lock before the
// node went, which the story names; an orphan a ghost told is not told
// again.
func (h *History) orphans(granted, told map[[2]string]bool) []Violation {
	sd := h.story()
	bySession := map[string][]Deletion{} // the nodes each session had
	for _, d := range sd.deletions {
		if d.node != "" && d.Lease != "" {
			bySession[d.Lease] = append(bySession[d.Lease], d)
		}
	}
	refused := map[histories.Process][]*operation{} // each process's definite refusals, in order
	for _, o := range h.ops {
		if o.f == histories.Acquire && o.status == histories.Fail {
			refused[o.process] = append(refused[o.process], o)
		}
	}
	var out []Violation
	for _, old := range sd.deletions {
		if old.node == "" || old.Lease == "" || old.owner < 0 || old.Token <= 0 || granted[[2]string{old.Key, old.node}] || told[[2]string{old.Key, old.node}] ||
			old.By != histories.DeletedByRevoke && old.By != histories.DeletedByExpiry {
			continue
		}
		i := slices.IndexFunc(bySession[old.Lease], func(d Deletion) bool {
			return d.Key == old.Key && d.node != old.node && d.Token > old.Token && d.Token < old.Revision
		})
		var r *operation
		for _, o := range refused[old.owner] {
			if o.key == old.Key && o.ret < old.Time {
				r = o
			}
		}
		if i < 0 || r == nil {
			continue
		}
		out = append(out, h.orphanStory(old, bySession[old.Lease][i], r))
	}
	return out
}

// orphanStory tells of the orphan old, still in line when later was made,
// after the client's definite refusal r.
func (h *History) orphanStory(old, later Deletion, r *operation) Violation {
	v := Violation{Check: histories.CheckLiveness, Kind: "orphan", Key: old.Key, Processes: []int{int(r.process)}, From: r.ret, To: max(old.Time, r.ret),
		Faults: h.faultsDuring(r.ret, max(old.Time, r.ret))}
	how := "closed"
	if old.By == histories.DeletedByExpiry {
		how = "expired"
	}
	who := fmt.Sprintf("Process %d", r.process)
	if c := h.sd.clients[r.process]; c != "" {
		who = fmt.Sprintf("Client %s (process %d)", c, r.process)
	}
	v.Story = fmt.Sprintf("%s was refused lock %q definitely at %s (%s), which says its acquire held nothing, its node removed; yet its session %s's node %s (created at revision %d, never granted) "+
		"was still in the lock's queue when the same session created %s (revision %d), and went only when the session %s, at %s (revision %d): "+
		"an orphan that every later waiter queued behind (a clean-up whose error was swallowed)",
		who, old.Key, h.at(r.ret), cmp.Or(h.errs[r], "refused"), old.Lease, old.node, old.Token, later.node, later.Token, how, h.at(old.Time), old.Revision)
	if len(v.Faults) > 0 {
		v.Story += "; faults active then: " + h.describeFaults(v.Faults)
	}
	v.Story += "."
	return v
}

// ghostStory tells of the ghost that d's clean-up left behind and end
// deleted.
func (h *History) ghostStory(d, end Deletion) Violation {
	v := Violation{Check: histories.CheckLiveness, Kind: "ghost", Key: d.Key, From: d.Time, To: max(end.Time, d.Time),
		Faults: h.faultsDuring(d.Time, max(end.Time, d.Time))}
	who := "A client"
	if len(d.Targets) == 1 {
		who = "Client " + d.Targets[0]
	}
	if d.owner >= 0 {
		v.Processes = []int{int(d.owner)}
		who += fmt.Sprintf(" (process %d)", d.owner)
	}
	how := "closed"
	if end.By == histories.DeletedByExpiry {
		how = "expired"
	}
	v.Story = fmt.Sprintf("%s gave up its wait for lock %q at %s behind a node of its own session %s: %s (created at revision %d, never granted) "+
		"headed the lock's queue when the client deleted its later node %s (revision %d), and went only when the session %s, at %s (revision %d). "+
		"The client did not know it had that node: while it headed the queue nobody held the lock and nobody could be granted it, the client included "+
		"(a node left behind by a create whose reply was lost and that was made again, or by a clean-up whose error was swallowed)",
		who, d.Key, h.at(d.Time), d.Lease, d.headOwn, d.headOwnRev, d.node, d.Revision, how, h.at(end.Time), end.Revision)
	if len(v.Faults) > 0 {
		v.Story += "; faults active then: " + h.describeFaults(v.Faults)
	}
	v.Story += "."
	return v
}
