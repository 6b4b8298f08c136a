package nemesis

import (
	"math/rand/v2"
	"slices"
)

// The openings of an aimed schedule: one strike early in the run for each
// class of moment where lock bugs live, before the faults drawn at random.
// Those are spread over many families whose starts and stops take
// seconds each (a member removed and added back, a lost release waiting
// for its client's next grant), and a 30 s run draws only five or six of
// them: a class that needs one fault at one moment (a waiter's lease
// ended while it queues: etcd#11456, etcd#11051; a release whose request
// never arrived: etcd#22123) was often struck by none. Each opening is
// marked with param opening, which the aim pass and holderPauseFirst
// leave alone.

// openings are the strikes an aimed schedule opens with, in order, their
// At left to the caller: the holder's lost release reply (openingStrike),
// a queued waiter's lease ended (waiterOpening), the holder's release
// whose request is lost (requestOpening), and a waiter's clock stepped
// ahead (clockOpening); those fams and the run offer.
// None where the run offers no lost replies: a run of a family or two
// (sweep's time to harm under pause, isolate or lease alone) is about
// those faults on the holder, and a waiter's strike first put off the
// first harm (pause, seeds 1-6: the median first stale write at 7.11 s,
// 4.19 s without it).
func (c Config) openings(seed int64, fams []Family) []Entry {
	if !c.opensLost(fams) {
		return nil
	}
	out := []Entry{openingStrike(seed, c)}
	if w, ok := c.waiterOpening(seed, fams); ok {
		out = append(out, w)
	}
	out = append(out, c.requestOpening(seed))
	if k, ok := c.clockOpening(seed, fams); ok {
		out = append(out, k)
	}
	return out
}

// requestOpening is the holder's lost release as an opening, whose request
// is lost with its reply (param request): the release never reaches the
// server, whose grant stays, and a service that retries it, or acquires
// again, meets that grant (etcd#22123; etcd#22082 when the retry comes
// after the next grant, which param hold_next holds open).
//
// It is cut after TTL/16, not the family's TTL/8 to TTL/4: the server
// needs no time to apply a request it never sees, and the session's
// renewals are held with it (their replies only, with a lost reply), then
// resume only a second or so after the cut; held longer, the session's
// lease ran out after the cut (election-retry seed 1, TTL 2 s: 1.4 s
// after), and with it the grant the retry should meet.
func (c Config) requestOpening(seed int64) Entry {
	rng := rand.New(rand.NewPCG(uint64(seed), lostStream+2))
	return Entry{
		Fault: LostReplyRelease, Target: TargetHolder,
		Fallback: c.Clients[rng.IntN(len(c.Clients))],
		Duration: c.TTL / 16,
		Params:   map[string]string{"request": "lost", "hold_next": (c.TTL / 4).String(), "opening": "release-request"},
	}
}

// waiterStream is the PCG stream of the waiter opening's draws.
const waiterStream = 0x77616974

// waiterOpening is an aimed schedule's strike on a queued waiter's lease:
// the waiter first in line, struck as the holder enters its section (param
// ahead, bounded: a section just begun, not one under way), so that it has
// waited only through the sections before and is granted next, well before
// its acquire gives up, when no waiter has waited TTL/4 yet (param waited:
// a section begun behind a long one is passed over); struck behind a
// section under way, the first in line had often waited seconds and gave
// up first (mutex-3.4 seed 1: the revocation came 0.8 s before its
// acquire's 5 s ran out), and the last in line waited behind every section
// and gave up as well (seed 5). Its lease
// is revoked when the system offers that, behind a section of at least
// workAhead (the server deletes its key while the holder still works), the
// revocation in force until the lock passes on (param until); else the
// client is paused past its lease (waiterPause) behind a section of at
// most a TTL, as a waiter of a lock in a process of its own is: its claim
// blocks the line until its lease runs out, and it wakes to a grant while
// its acquire still waits. The client drawn from the seed is the fallback.
// ok is false when the run has no clients, no aim, or neither kind is
// offered.
func (c Config) waiterOpening(seed int64, fams []Family) (Entry, bool) {
	if !c.Aim || len(c.Clients) == 0 {
		return Entry{}, false
	}
	rng := rand.New(rand.NewPCG(uint64(seed), waiterStream))
	e := Entry{Target: TargetWaiter, Fallback: c.Clients[rng.IntN(len(c.Clients))]}
	switch {
	case c.offersKind(fams, LeaseRevoke):
		e.Fault = LeaseRevoke
		e.Params = map[string]string{"ahead": workAhead.String() + "-" + (2 * c.TTL).String(), "until": "passed", "waited": (c.TTL / 4).String()}
	case c.offersKind(fams, PauseClient):
		e.Fault = PauseClient
		r := c.Durations[pause{}.Spec().Name]
		e.Duration = max(r.Min, min(r.Max, waiterPause(c.TTL)))
		e.Params = map[string]string{"before_write": "false", "ahead": "0s-" + c.TTL.String(), "waited": (c.TTL / 4).String()}
	default:
		return Entry{}, false
	}
	e.Params["opening"] = "waiter"
	return e, true
}

// offersKind says whether one of fams draws kind for a run with clients.
func (c Config) offersKind(fams []Family, kind string) bool {
	for _, f := range fams {
		if slices.Contains(c.kinds(f, true), kind) {
			return true
		}
	}
	return false
}
