// The liveness check's ghosts: a client that gave up waiting behind a node
// of its own in its lock's queue, a node it did not know it had.

package checker

import (
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
	}
	return out
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
