// Reading the nemesis and workload events of a history into what stories
// and checks draw on: fault windows, deletions, lost leases, beliefs.

package checker

import (
	"cmp"
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
	// of a lock key (0: not recorded, or a server without revisions);
	// observedAll whether an observed event says the history holds every
	// deletion the server reported.
	ttl         time.Duration
	observed    int64
	observedAll bool
	// backend is the system under test from the setup event ("" in a
	// history from before it was recorded).
	backend string
	// recipe is the lock recipe the setup event names.
	recipe string
	// noFencingToken: the setup event says the recipe's token is no
	// fencing token (locktest's count, taken after the grant).
	noFencingToken bool
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
		switch op.F {
		case histories.FStart:
			open[id] = append(open[id], len(sd.faults))
			sd.faults = append(sd.faults, Fault{Fault: fault, Targets: targets, Params: params, Start: op.Time, End: h.end, Unended: true, Index: op.Index})
		case histories.FStop:
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
		case histories.FHeal:
			for k, stack := range open {
				for _, i := range stack {
					closeAt(i, op.Time)
				}
				delete(open, k)
			}
			sd.heal = op.Time
		case histories.FSetup:
			// What the run does (see Invariant), not a fault.
			if ttl, ok := paramInt(v, "ttl"); ok && ttl > 0 {
				sd.ttl = time.Duration(ttl) * time.Second
			}
			sd.backend, sd.recipe = param(v, "backend"), param(v, "recipe")
			sd.noFencingToken = param(v, "fencing_token") == "false"
		case histories.FEnd: // the run's end, no fault (see Cut)
		case histories.FObserved:
			sd.observedAll = true
			if rev, ok := paramInt(v, "revision"); ok {
				sd.observed = rev
			}
		case histories.FProcess:
			if p, ok := paramInt(v, "process"); ok && len(targets) == 1 {
				sd.clients[histories.Process(p)] = targets[0]
			}
		case histories.FKeyDeleted:
			tok, _ := paramInt(v, "create_revision")
			rev, _ := paramInt(v, "revision")
			sd.deletions = append(sd.deletions, Deletion{Key: param(v, "key"), Token: tok, Revision: rev, Lease: param(v, "lease"), By: param(v, "by"),
				Targets: targets, Time: op.Time, Index: op.Index, params: params})
		case histories.FLockerFailed:
			if len(targets) == 1 {
				sd.lockerFailed = append(sd.lockerFailed, lockerFailure{client: targets[0], time: op.Time, err: param(v, "error")})
			}
		case histories.FLeaseLost:
			tok, _ := paramInt(v, "token")
			sd.lost = append(sd.lost, leaseLost{key: param(v, "key"), token: tok, targets: targets, time: op.Time})
		default:
			sd.faults = append(sd.faults, Fault{Fault: fault, Targets: targets, Params: params, Start: op.Time, End: op.Time, Index: op.Index})
		}
	}
	// Beliefs.
	holding := map[hold]*operation{}
	// A belief lasts from the grant to the release's invocation, even when
	// the client's session noticed the lease was gone: a client that does
	// not check goes on acting as the holder (the story tells when it
	// noticed).
	end := func(a *operation, to int64, how string) {
		sd.beliefs = append(sd.beliefs, Belief{Key: a.key, Process: int(a.process), Token: a.tok, HasToken: a.hasTok, From: a.ret, To: to, Ended: how, AcquireIndex: a.inv})
	}
	for _, o := range h.ops {
		k := hold{o.process, o.key}
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
	for _, k := range sortedHolds(holding) {
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
