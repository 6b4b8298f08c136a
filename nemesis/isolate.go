package nemesis

import (
	"context"
	"time"

	"github.com/locktest/locktest/system"
)

// Isolate cuts one client (normally the holder) from every member with
// toxiproxy; its link to the resource stays, so it goes on working.
const Isolate = "isolate"

type isolate struct{}

// Spec says what the family is, as data.
func (isolate) Spec() Spec {
	return Spec{
		Name:  "isolate",
		Doc:   "Cuts one client (normally the holder) from every member with toxiproxy, while it goes on working.",
		Kinds: []Kind{{Name: Isolate, Needs: []system.Capability{system.CapLinks}, Clients: true, Says: says("was isolated")}},
		// An isolated holder matters once its lease has run out: outlast
		// it.
		Durations: func(ttl time.Duration) Range { return Range{ttl + ttl/2, 2*ttl + 2*time.Second} },
	}
}

func (isolate) Draw(g *Gen, e *Entry, d Range) {
	// Mostly the holder: an isolated waiter matters only to a lock bug,
	// which lease starvation of a waiter finds as well.
	g.roleTarget(e, 0.85, 0.1)
	g.aim(e, g.cfg.TTL+g.cfg.TTL/4, 0)
	e.Duration = g.dur(d)
}

func (isolate) Inject(ctx context.Context, env *Env, e Entry) (*Injected, error) {
	inj := &Injected{Params: map[string]string{}}
	name, err := env.client(ctx, e, inj, true)
	if err != nil {
		return inj, err
	}
	return inj, cutClient(env, name, Isolate, inj)
}
