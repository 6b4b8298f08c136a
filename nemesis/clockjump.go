package nemesis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/system"
)

// ClockJumpEmulated is an EMULATION of a server's clock jumping forward:
// the server expires now every key it has with a TTL, the holder's lock key
// among them, as it would if its clock had jumped past their expiry. Not a
// clock change: the servers share the host's clock (libfaketime cannot
// start Debian's redis-server), and nothing else on the server moves in
// time. The family's name says so too.
const ClockJumpEmulated = "clock-jump-emulated"

type clockJump struct{}

// Spec says what the family is, as data.
func (clockJump) Spec() Spec {
	return Spec{
		Name:  ClockJumpEmulated,
		Doc:   "Asked for by name: an EMULATION of a server's clock jumping forward, not a clock change (the servers share the host clock; libfaketime cannot start Debian's redis-server): when a holder enters a section with work ahead (200 ms or more, as a lease revocation waits for; a short section could release its key first), the first server from the drawn one that holds keys with a TTL expires them all at once (`expired`, `emulated`); nothing else on it moves in time. The expiries come after the fault's start in the history, so a check that reads them finds the fault active.",
		Kinds: []Kind{{Name: ClockJumpEmulated, Needs: []system.Capability{system.CapExpireEarly}, Says: clockSays("was made to jump forward (emulated: its lock keys expired early)")}},
		// The keys are gone at once; the fault stays in force (nothing to
		// undo) for a TTL or two, while the next client takes the lock and
		// the holder, unaware, works on: no other fault blurs what it did
		// meanwhile.
		Durations: func(ttl time.Duration) Range { return Range{ttl, 2 * ttl} },
		// It is an emulation, not a clock fault.
		ByNameOnly: true,
	}
}

// Draw aims at a server holding the key of a fresh grant (its holder has
// its section ahead of it), or of a grant on a bare quorum
// (Gen.bareQuorum); Target names the server tried first.
func (clockJump) Draw(g *Gen, e *Entry, d Range) {
	if !g.bareQuorum(e) {
		e.Target = g.member()
		if len(g.cfg.Clients) > 0 {
			e.Params["on"] = "grant"
		}
	}
	e.Duration = g.dur(d)
}

// Inject (with on=grant) waits for a holder entering a section with work
// ahead, as a lease revocation does, and aims at the first server, from
// Target on, that holds keys with a TTL: with Redlock, one of the masters
// holding the holder's key. Not merely a fresh grant: a short section can
// release its key before the jump strikes, and then nothing expires. The
// keys expire in Hold, once the fault's start is in the history: their
// deletions must not come before the fault that caused them.
func (clockJump) Inject(ctx context.Context, env *Env, e Entry) (*Injected, error) {
	inj := &Injected{Params: map[string]string{"emulated": "keys with a TTL expired now; no clock was changed"}}
	x, err := need[system.EarlyExpirer](env)
	if err != nil {
		return inj, err
	}
	names := env.Sys.MemberNames()
	first := slices.Index(names, e.Target)
	if first < 0 {
		return inj, fmt.Errorf("no member %q", e.Target)
	}
	if e.Params["on"] == "grant" && env.Clients != nil {
		aimed := Entry{Target: TargetHolder, Params: maps.Clone(e.Params)}
		if _, ok := aimed.Params["ahead"]; !ok {
			aimed.Params["ahead"] = workAhead.String() + "-"
		}
		h, err := env.resolveClient(ctx, aimed, inj.Params, true)
		if err != nil && !errors.Is(err, errNotStruck) {
			// No holder: the jump strikes whatever keys there are.
			inj.Params["holder"] = "none"
		} else if err != nil {
			return inj, err
		} else {
			inj.Params["holder"] = h
		}
	}
	var errs []error
	for k := range names {
		i := (first + k) % len(names)
		keys, err := x.Expiring(ctx, i)
		if err != nil {
			// A replica runs no script; a paused or crashed server none.
			errs = append(errs, err)
			continue
		}
		if len(keys) == 0 {
			continue
		}
		inj.Targets = []string{names[i]}
		var strikeErr error
		inj.Hold = func(ctx context.Context, d time.Duration) map[string]string {
			end := time.Now().Add(d)
			keys, err := x.ExpireEarly(ctx, i)
			strikeErr = err
			sleepUntil(ctx, end)
			if len(keys) == 0 {
				return map[string]string{"expired": "none: the keys were gone by then"}
			}
			return map[string]string{"expired": strings.Join(keys, ",")}
		}
		inj.Stop = func(context.Context) error { return strikeErr }
		return inj, nil
	}
	if len(errs) > 0 {
		return inj, errors.Join(errs...)
	}
	inj.Params["expired"] = "none: no server had a key with a TTL"
	return inj, nil
}
