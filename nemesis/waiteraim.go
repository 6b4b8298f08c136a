package nemesis

import (
	"math/rand/v2"
	"slices"
	"time"
)

// A waiter's lease ended while it queues, in an aimed schedule. Whether a
// lock grants a waiter whose claim lapsed in line (etcd#11456), or leads
// on a key deleted while it campaigned (etcd#11051), shows only when one
// fault ends a queued waiter's lease and the holder releases while that
// waiter still waits: a single strike at that moment is enough, and a run
// whose random faults never made it says nothing of the queue. An aimed
// schedule strikes it once early, after the lost release reply it opens
// with, as a class of its own beside the others: the random faults after
// it are spread over many families whose starts and stops take seconds
// each (a member removed and added back, a lost release waiting for its
// client's next grant), and a 30 s run draws only five or six of them.

// waiterStream is the PCG stream of the waiter opening's draws.
const waiterStream = 0x77616974

// waiterOpening is an aimed schedule's strike on a queued waiter's lease,
// at at: the waiter queued last (param queued), behind a holder with its
// section ahead of it (waiterAhead), its lease revoked when the system offers that (the
// server deletes its key at once, and the holder releases after), else
// the client paused past its lease but not past its acquire
// (waiterPause), as a waiter of a lock in a process of its own is. The
// client drawn from the seed is the fallback. ok is false when the run
// has no clients, no aim, or neither kind is offered.
func (c Config) waiterOpening(seed int64, fams []Family, at time.Duration) (Entry, bool) {
	if !c.Aim || len(c.Clients) == 0 {
		return Entry{}, false
	}
	rng := rand.New(rand.NewPCG(uint64(seed), waiterStream))
	e := Entry{At: at, Target: TargetWaiter, Fallback: c.Clients[rng.IntN(len(c.Clients))]}
	switch {
	case c.offersKind(fams, LeaseRevoke):
		e.Fault = LeaseRevoke
	case c.offersKind(fams, PauseClient):
		e.Fault = PauseClient
		r := c.Durations[pause{}.Spec().Name]
		e.Duration = max(r.Min, min(r.Max, waiterPause(c.TTL)))
		e.Params = map[string]string{"before_write": "false"}
	default:
		return Entry{}, false
	}
	if e.Params == nil {
		e.Params = map[string]string{}
	}
	e.Params["ahead"] = waiterAhead(e.Fault, c.TTL).String() + "-"
	e.Params["queued"] = "last"
	// Aimed already: the aim pass and holderPauseFirst leave it alone.
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
