package nemesis

import (
	"context"
	"math/rand/v2"
	"time"
)

// waitStream is the PCG stream of the long-wait opening's draw.
const waitStream = 0x77616974696e67

// waitOpening is an aimed schedule's strike on a client granted after a
// long wait whose section then runs long: the link to the resource of a
// waiter that has waited a TTL already (param queued) gets a latency of
// 3/4 TTL for three TTLs, so that the section it enters on its grant (a
// read and a write, each held that long) outlasts its TTL, with no fault
// on its links to the servers. A lock that renews keeps its key through
// such a section; one that dates its lease from the start of its acquire
// rather than from the attempt that won hands that client a lease already
// run out, never renews it, and its key expires under the holder
// (node-redlock#296: redlock 5.0.0-beta.2's using()). Waits of a TTL come
// behind slow sections; without this strike the section after one is
// seldom slow too (a tenth of them, by default). ok is false without aim,
// clients, or slow links the run offers.
func (c Config) waitOpening(seed int64, fams []Family) (Entry, bool) {
	if !c.Aim || len(c.Clients) == 0 || !c.offersKind(fams, Slow) {
		return Entry{}, false
	}
	rng := rand.New(rand.NewPCG(uint64(seed), waitStream))
	return Entry{
		Fault: Slow, Target: TargetWaiter,
		Fallback: c.Clients[rng.IntN(len(c.Clients))],
		Duration: 3 * c.TTL,
		Params: map[string]string{"link": linkResource, "toxic": "latency", "latency": (3 * c.TTL / 4).String(), "jitter": "0s",
			"queued": c.TTL.String(), "opening": "long-wait"},
	}, true
}

// queuedWaiter waits, at most aimWait (or until the aimed schedule's end
// of aim), for a client that has waited at least queued in its acquire.
func (env *Env) queuedWaiter(ctx context.Context, queued time.Duration) (string, bool) {
	wait := aimWait
	if !env.aimBy.IsZero() {
		wait = min(wait, time.Until(env.aimBy))
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		if w, ok := env.Clients.Waiter(queued); ok {
			return w, true
		}
		if !sleepUntil(wctx, time.Now().Add(5*time.Millisecond)) {
			return "", false
		}
	}
}
