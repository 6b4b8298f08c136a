package nemesis

import (
	"math/rand/v2"
	"time"
)

// Lost replies where locks break, in an aimed schedule. The replies whose
// loss leaves a claim in doubt are a release's (the service retries it and
// may delete a newer grant: etcd#22082) and an acquire's (the claim
// created a second time: ZOOKEEPER-1262's ghost node); a lost renewal
// costs the client one renewal of the several its lease gets.

// lostStream is the PCG stream of the lost replies' aim.
const lostStream = 0x6c6f7374

// renewToRelease is the share of lost renewal replies that an aimed
// schedule turns on the holder's release instead.
const renewToRelease = 0.5

// aimLost turns the lost replies of s on releases and acquires, from the
// seed on a stream of its own: every lost release reply strikes the
// holder's (the client drawn kept as the fallback; a release is only ever
// a holder's, and the holder's comes within its section, not whenever the
// client drawn holds again), a share of the lost renewal replies become
// the holder's lost release reply, and the others its lost acquire reply
// (the holder's next acquire).
func aimLost(seed int64, s *Schedule, cfg Config) {
	rng := rand.New(rand.NewPCG(uint64(seed), lostStream))
	r := cfg.Durations[lostReply{}.Spec().Name]
	for i := range s.Entries {
		e := &s.Entries[i]
		if e.Params["cell"] != "" {
			continue // steered: aimed at its cell already
		}
		turned := e.Fault == LostReplyRenew
		if turned {
			// A lost renewal reply costs little: a share strike the
			// holder's release, the rest its next acquire, whose request
			// creates its claim, which the lost reply leaves in doubt.
			e.Fault = LostReplyAcquire
			if rng.Float64() < renewToRelease {
				e.Fault = LostReplyRelease
			}
			e.Duration = lostDur(rng, r)
			delete(e.Params, "ahead")
		}
		if (e.Fault == LostReplyRelease || turned) && e.Target != TargetHolder {
			fallback := e.Target
			if e.Target == TargetWaiter {
				fallback = e.Fallback
			}
			e.Target, e.Fallback = TargetHolder, fallback
		}
		if len(e.Params) == 0 {
			e.Params = nil
		}
	}
}

// lostDur draws a lost reply's duration from r in whole milliseconds.
func lostDur(rng *rand.Rand, r Range) time.Duration {
	if r.Max <= r.Min {
		return r.Min
	}
	return r.Min + time.Duration(rng.Int64N(int64((r.Max-r.Min)/time.Millisecond)+1))*time.Millisecond
}

// opensLost says whether an aimed schedule has openings (opening.go),
// among them the holder's lost release reply: it does when the system
// offers it and the run has clients.
func (c Config) opensLost(fams []Family) bool {
	return c.Aim && len(c.Clients) > 0 && c.offersKind(fams, LostReplyRelease)
}

// openingStrike is the holder's lost release reply an aimed schedule
// opens with (first where no lease can be revoked, else after the
// holder's and the waiter's strikes; the client drawn from the seed when
// nobody holds the lock then). Most faults of a run come late, waiting for their moment or
// for the fault before, and the lost release replies drawn late often
// never run; a retry of the release needs time after it besides, the
// client's next grant.
func openingStrike(seed int64, cfg Config) Entry {
	rng := rand.New(rand.NewPCG(uint64(seed), lostStream+1))
	return Entry{
		Fault: LostReplyRelease, Target: TargetHolder,
		Fallback: cfg.Clients[rng.IntN(len(cfg.Clients))],
		Duration: lostDur(rng, cfg.Durations[lostReply{}.Spec().Name]),
	}
}
