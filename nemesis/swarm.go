package nemesis

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Swarm testing (Groce et al., "Swarm Testing", ISSTA 2012): a run that
// draws every fault from every family spreads its few faults thin; one that
// draws from a random subset of them concentrates on those, so that across
// runs some strike the same kind of moment again and again. Each family is
// kept with probability swarmKeep, at least one; the subset is drawn from
// the seed on a stream of its own, so that with Swarm off a seed's schedule
// is what it always was.
const swarmKeep = 0.5

// swarmStream and aimStream are the PCG streams of the swarm's and the
// aim's draws.
const (
	swarmStream = 0x737761726d
	aimStream   = 0x61696d
)

// swarm is the subset of fams a swarm run draws from.
func swarm(seed int64, fams []Family) []Family {
	if len(fams) < 2 {
		return fams
	}
	rng := rand.New(rand.NewPCG(uint64(seed), swarmStream))
	var keep []Family
	for _, f := range fams {
		if rng.Float64() < swarmKeep {
			keep = append(keep, f)
		}
	}
	if len(keep) == 0 {
		keep = []Family{fams[rng.IntN(len(fams))]}
	}
	return keep
}

// waiterAim is the share of the client faults that end a lease (isolation,
// lease starvation and revocation, a pause of a client) that an aimed
// schedule turns on a waiter queued behind a long section: the moment the
// lock bugs of the queue live in (etcd#11456: a waiter whose lease expired
// in line is granted; ZooKeeper's ghost znode blocks the queue behind it).
const waiterAim = 0.5

// holderAim is the share of lost acquire replies that an aimed schedule
// turns on the holder's next acquire.
const holderAim = 0.5

// aimAt turns some client faults of s on the moments where locks break,
// from the seed on a stream of its own: a share of the faults that can
// outlast a lease strike a waiter queued behind a section with work left
// (waiterAhead; those drawn on a waiter are aimed so too), with the
// client first drawn as the fallback, and a share of lost acquire replies
// strike the holder's next acquire; a lost release reply of the holder
// holds its next section open (param hold_next, TTL/4). Faults on the
// holder keep their target. The first pause and the first isolation
// strike the holder (holderFirst), and a pause of the holder armed for its write
// strikes at once a holder mid-section (param mid_section).
func aimAt(seed int64, s *Schedule, ttl time.Duration) {
	rng := rand.New(rand.NewPCG(uint64(seed), aimStream))
	holderFirst(s.Entries)
	for i := range s.Entries {
		e := &s.Entries[i]
		if e.Params["cell"] != "" || e.Params["opening"] != "" {
			continue // steered or an opening: aimed already
		}
		if e.Fault == PauseClient && e.Target == TargetHolder && e.Params["before_write"] == "true" {
			// A holder mid-section is paused at once, not at its write
			// seconds later: the pause's clock starts now, and it still
			// has its write ahead of it.
			e.Params["mid_section"] = workAhead.String()
			continue
		}
		if e.Fault == LostReplyRelease && e.Target == TargetHolder {
			// The release in doubt is retried by services once they hold
			// the lock again: the next section held open long enough for
			// that retry to find its grant alive (etcd#22082).
			if e.Params == nil {
				e.Params = map[string]string{}
			}
			e.Params["hold_next"] = (ttl / 4).String()
			continue
		}
		if e.Fault == LostReplyAcquire && e.Target != TargetHolder && rng.Float64() < holderAim {
			// The holder's next acquire: its request creates its claim
			// (a znode, a key) and the lost reply leaves it in doubt
			// (ZOOKEEPER-1262's ghost znode).
			e.Target, e.Fallback = TargetHolder, cmp.Or(e.Fallback, e.Target)
			continue
		}
		if !aimable(e.Fault) || e.Target == TargetHolder || e.Target == "" {
			continue
		}
		if e.Target != TargetWaiter {
			if !slices.Contains(s.Clients, e.Target) || rng.Float64() >= waiterAim {
				continue
			}
			e.Target, e.Fallback = TargetWaiter, e.Target
		}
		if e.Params == nil {
			e.Params = map[string]string{}
		}
		if _, ok := e.Params["ahead"]; !ok {
			e.Params["ahead"] = waiterAhead(e.Fault, ttl).String() + "-"
		}
	}
}

// holderFirst has a schedule's first pause strike the holder, and its
// first isolation too: the faults that harm soonest. A paused member, or a
// paused or isolated waiter, harms no resource, and each such fault lasts
// more than a TTL, so a run whose first one missed showed harm only from
// its second (isolations held out, seeds 303 and 304: a waiter's 3.7 s
// and 5.8 s first, harm at 11.3 s and 11.0 s). For each class it swaps
// what the first fault and the first fault of the holder strike (kind,
// targets, params), each slot keeping its time and duration (drawn from
// the same range): the schedule still strikes as many members and
// waiters, later.
func holderFirst(es []Entry) {
	swapHolderFirst(es, isPause, PauseClient)
	swapHolderFirst(es, func(e Entry) bool { return e.Fault == Isolate }, Isolate)
}

// isPause says whether e pauses a client or a member for a while (not one
// staging the strike after it).
func isPause(e Entry) bool {
	return e.Fault == PauseClient || e.Fault == PauseMember && e.Params["until"] == ""
}

// swapHolderFirst makes the first entry of class in es the first of kind
// on the holder, if es has one. Entries aimed already (steered, an
// opening) are not of any class.
func swapHolderFirst(es []Entry, class func(Entry) bool, kind string) {
	first := -1
	for i, e := range es {
		if !class(e) || e.Params["cell"] != "" || e.Params["opening"] != "" {
			continue
		}
		holder := e.Fault == kind && e.Target == TargetHolder
		switch {
		case first < 0 && holder:
			return
		case first < 0:
			first = i
		case holder:
			es[first], es[i] = es[i], es[first]
			es[first].At, es[i].At = es[i].At, es[first].At
			es[first].Duration, es[i].Duration = es[i].Duration, es[first].Duration
			return
		}
	}
}

// waiterAhead is how much of the holder's section an aimed fault on a
// waiter wants left: a revocation, which deletes the waiter's key at once,
// a moment (so that the grant comes after the deletion, not on the state
// before it); the others, which end the lease only once it runs out, more
// than a TTL.
func waiterAhead(kind string, ttl time.Duration) time.Duration {
	if kind == LeaseRevoke {
		return workAhead
	}
	return ttl + ttl/4
}

// aimable are the fault kinds that end a client's lease (or strike it for
// longer than its lease), so that a waiter's claim lapses while it queues.
func aimable(kind string) bool {
	switch kind {
	case Isolate, LeaseStarve, LeaseRevoke, PauseClient:
		return true
	}
	return false
}

// DefaultMix is --nemesis-mix's default: dense faults, aimed. Against the
// catalogued bugs under --nemesis all it caught more than even (locktest
// power; docs/findings.md), and struck sooner (sweep's time to harm).
const DefaultMix = "aim,dense"

// Mixes are the words of --nemesis-mix besides "even".
var Mixes = []string{"swarm", "aim", "dense"}

// ParseMix reads --nemesis-mix into c: "even", or a comma list of Mixes.
func (c *Config) ParseMix(s string) error {
	c.Swarm, c.Aim, c.Dense = false, false, false
	if s == "even" || s == "" {
		return nil
	}
	for _, m := range strings.Split(s, ",") {
		switch strings.TrimSpace(m) {
		case "swarm":
			c.Swarm = true
		case "aim":
			c.Aim = true
		case "dense":
			c.Dense = true
		default:
			return fmt.Errorf("%q: want even, or a comma list of %s", m, strings.Join(Mixes, ", "))
		}
	}
	return nil
}

// gap is the quiet time before each fault: the interval, or in a dense
// schedule a quarter of it, after long faults as after short ones. The
// bugs a random run finds each need one fault at one moment (a waiter's
// lease ended, a release's reply lost), and a run gets only as many
// draws as it has faults; the first strikes the clients' first grants,
// not an idle start.
func (c Config) gap() time.Duration {
	if c.Dense {
		return c.Interval / 4
	}
	return c.Interval
}

// family draws the family of the next fault: uniformly, or in a dense
// schedule in proportion to how many of its faults fit in a given time (1
// over the mean, by its kinds' weights, of a fault's duration and the
// quiet time after it; an instant kind lasts no time), so that each family
// has about an equal share of the run's time: a lost reply, over in a
// fraction of a second, is drawn several times as often as an isolation
// that outlasts the lease, and a lease family whose revocations are
// instant more often than its starvations alone would make it.
func (g *Gen) family(fams []Family) Family {
	if !g.cfg.Dense {
		return fams[g.rng.IntN(len(fams))]
	}
	w := make([]float64, len(fams))
	total := 0.0
	for i, f := range fams {
		w[i] = 1 / g.cfg.meanTime(f).Seconds()
		total += w[i]
	}
	u := g.rng.Float64() * total
	for i, f := range fams {
		if u -= w[i]; u < 0 {
			return f
		}
	}
	return fams[len(fams)-1]
}

// meanTime is the mean time a fault of f takes in a run: its family's
// Settle, and its duration and the quiet time after it, over the kinds a
// schedule may draw, by their weights.
func (c Config) meanTime(f Family) time.Duration {
	r := c.Durations[f.Spec().Name]
	mean := (r.Min + r.Max) / 2
	var sum, n time.Duration
	for _, name := range c.kinds(f, len(c.Clients) > 0) {
		k, _, _ := kindOf(name)
		d := mean
		if k.Instant {
			d = 0
		}
		w := time.Duration(max(k.Weight, 1))
		sum += w * (d + c.gap())
		n += w
	}
	if n == 0 {
		return f.Spec().Settle + mean + c.gap()
	}
	return f.Spec().Settle + sum/n
}
