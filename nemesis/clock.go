package nemesis

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Clock faults skew one client's clock (normally the holder's).
const (
	ClockBump   = "clock-bump"   // jump it by delta
	ClockStrobe = "clock-strobe" // jump it by +delta and -delta every period
	ClockRate   = "clock-rate"   // make it run at rate
)

type clockFault struct{}

// Spec says what the family is, as data.
func (clockFault) Spec() Spec {
	return Spec{
		Name: "clock",
		Doc:  "Skews one client's clock (normally the holder's, mostly backwards or slow): `bump` steps it, `rate` makes it drift, and, one time in seven, `strobe` flaps it. Only the clients' clocks: the servers share the host's.",
		// A drifting or stepped clock misleads a holder; a strobing one
		// mostly ends its waits early, which harms nothing.
		Kinds: []Kind{
			{Name: ClockBump, Weight: 3, Clients: true, Says: clockSays("was bumped")},
			{Name: ClockStrobe, Weight: 1, Clients: true, Says: clockSays("was strobed")},
			{Name: ClockRate, Weight: 3, Clients: true, Says: clockSays("ran at a skewed rate")},
		},
		// A skewed clock matters over several lease periods: that long, a
		// slow holder's renewals fall behind while its own clock vouches
		// for it.
		Durations:      func(ttl time.Duration) Range { return Range{2 * ttl, 5 * ttl} },
		DurationParams: []string{"delta", "period"},
		NumberParams:   []string{"rate"},
	}
}

// clockSays is Kind.Says for a fault on the targets' clocks.
func clockSays(phrase string) func([]string, map[string]string) string {
	return func(ts []string, _ map[string]string) string { return "the clock of " + targets(ts) + " " + phrase }
}

// Draw favours the holder and the slow direction: a holder whose clock
// falls behind renews its lease late and trusts it too long.
func (clockFault) Draw(g *Gen, e *Entry, d Range) {
	g.clientTarget(e, 0.9)
	// A section the clock guard lets write (under TTL less its margin)
	// that a slow clock stretches past the lease.
	g.aim(e, g.cfg.TTL/4, 3*g.cfg.TTL/4)
	switch e.Fault {
	case ClockBump:
		// Stepped back by more than a TTL, the holder's timers (its
		// renewals, its section) fire that much later: its lease runs out
		// before it writes.
		delta := g.between(g.cfg.TTL+g.cfg.TTL/4, 2*g.cfg.TTL)
		if g.chance(0.85) {
			delta = -delta
		}
		e.Params["delta"] = delta.String()
	case ClockStrobe:
		e.Params["delta"] = g.between(200*time.Millisecond, 2*g.cfg.TTL).String()
		e.Params["period"] = g.between(10*time.Millisecond, 200*time.Millisecond).String()
	case ClockRate:
		// Mostly slow enough that the holder's renewals fall behind its
		// lease (a renewal every TTL/3 of its time comes after the TTL).
		rates := []string{"0.1", "0.5", "0.75", "1.5", "2"}
		if g.chance(0.85) {
			rates = []string{"0.2", "0.25"}
		}
		e.Params["rate"] = rates[g.rng.IntN(len(rates))]
	}
	e.Duration = g.dur(d)
}

func (clockFault) Inject(ctx context.Context, env *Env, e Entry) (*Injected, error) {
	inj := &Injected{Params: map[string]string{}}
	name, err := env.client(ctx, e, inj, false)
	if err != nil {
		return inj, err
	}
	cl := env.Clients
	reset := func(context.Context) error { cl.ResetClock(name); return nil }
	switch e.Fault {
	case ClockBump:
		d, err := time.ParseDuration(e.Params["delta"])
		if err != nil {
			return inj, err
		}
		inj.Stop = reset
		cl.BumpClock(name, d)
	case ClockRate:
		rate, err := strconv.ParseFloat(e.Params["rate"], 64)
		if err != nil {
			return inj, err
		}
		// The drift stops, but the time the clock lost stays lost until the
		// final heal steps it back: a stepped clock would end the holder's
		// critical section early, which no drifting clock does.
		inj.Stop = func(context.Context) error { cl.SetClockRate(name, 1); return nil }
		cl.SetClockRate(name, rate)
	case ClockStrobe:
		d, err := time.ParseDuration(e.Params["delta"])
		if err != nil {
			return inj, err
		}
		period, err := time.ParseDuration(e.Params["period"])
		if err != nil {
			return inj, err
		}
		if period <= 0 {
			return inj, fmt.Errorf("strobe period %v", period)
		}
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			t := time.NewTicker(period)
			defer t.Stop()
			sign := time.Duration(1)
			for {
				cl.BumpClock(name, sign*d)
				sign = -sign
				select {
				case <-done:
					return
				case <-t.C:
				}
			}
		})
		inj.Stop = func(ctx context.Context) error {
			close(done)
			wg.Wait()
			return reset(ctx)
		}
	}
	return inj, nil
}

// Heal steps every client's clock back to the host's.
func (clockFault) Heal(_ context.Context, env *Env) ([]string, error) {
	if env.Clients != nil {
		for _, n := range env.Clients.Names() {
			env.Clients.ResetClock(n)
		}
	}
	return nil, nil
}
