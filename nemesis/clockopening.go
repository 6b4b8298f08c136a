package nemesis

import "math/rand/v2"

// clockStream is the PCG stream of the clock opening's draws.
const clockStream = 0x636c6f6b

// clockOpening is an aimed schedule's strike on a queued waiter's clock:
// stepped ahead by more than a TTL (TTL+TTL/2) while the holder has work
// ahead. A lease judged on the clients' clocks (an expiry written and
// compared on the client's clock, as pg-lease-client-clock does) is seen
// expired by that waiter, which takes it from a live holder; a lease
// judged on the server's clock, a session or a queue does not look at
// the client's clock, and holds. The random clock faults favour the
// holder and a slowed or stepped-back clock, whose harm every lease lock
// shares (its timers fire late, its lease lapses); most runs drew no clock
// fault at all before the run ended (pg-lease-client-clock, seed 1: none
// of fifteen entries).
//
// The step stays under the acquire's timeout (5 s by default), so that
// the waiter is granted rather than given up; so the waiter struck is the
// one that began to wait last (param waiter=newest): a
// polling lock's longest waiter has mostly waited seconds (pg-lease-
// client-clock's p99 acquire is over 4 s), and the step ended its acquire
// on its own clock before it asked again (seed 4). And the newest only
// once it has waited under TTL/2 (param waited, with waiter=newest: that
// waiter alone, not every waiter as the waiter opening asks): behind a
// slow section every waiter had queued for seconds, and the step ended
// the newest's 5 s acquire, begun 3.2 s before, as the server granted it,
// an acquire of unknown outcome that shows no overlap (seed 24 of 21-30,
// missed). Asking for every waiter fresh in line the way the waiter
// opening does waited its two TTLs for none, struck an idle moment, and
// put off the holder's faults that came after it (seeds 1-3: 0 caught, 3
// before): a polling lock's waiters mostly wait seconds. It lasts TTL/4:
// a polling waiter asks again well within that. ok is false without aim,
// clients, or a clock step the run offers.
func (c Config) clockOpening(seed int64, fams []Family) (Entry, bool) {
	if !c.Aim || len(c.Clients) == 0 || !c.offersKind(fams, ClockBump) {
		return Entry{}, false
	}
	rng := rand.New(rand.NewPCG(uint64(seed), clockStream))
	return Entry{
		Fault: ClockBump, Target: TargetWaiter,
		Fallback: c.Clients[rng.IntN(len(c.Clients))],
		Duration: c.TTL / 4,
		Params:   map[string]string{"delta": (c.TTL + c.TTL/2).String(), "ahead": workAhead.String() + "-", "waiter": "newest", "waited": (c.TTL / 2).String(), "opening": "clock"},
	}, true
}
