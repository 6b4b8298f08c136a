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

func (isolate) Name() string { return "isolate" }

// Doc says what its faults do, for the reference (docs/reference/faults.md).
func (isolate) Doc() string {
	return "Cuts one client (normally the holder) from every member with toxiproxy, while it goes on working."
}

func (isolate) Kinds(_ int, clients bool) []string { return onlyWithClients(clients, Isolate) }

func (isolate) Needs(string) []system.Capability { return []system.Capability{system.CapLinks} }

// Durations: an isolated holder matters once its lease has run out:
// outlast it.
func (isolate) Durations(ttl time.Duration) Range { return Range{ttl + ttl/2, 2*ttl + 2*time.Second} }

func (isolate) Draw(g *Gen, e *Entry, d Range) {
	// Mostly the holder: an isolated waiter matters only to a lock bug,
	// which lease starvation of a waiter finds as well.
	g.roleTarget(e, 0.85, 0.1)
	g.aim(e, g.cfg.TTL+g.cfg.TTL/4, 0)
	e.Duration = g.dur(d)
}

func (isolate) Check(e Entry, _ int) error { return needTarget(e) }

func (isolate) Inject(ctx context.Context, env *Env, e Entry) (*Injected, error) {
	inj := &Injected{Params: map[string]string{}}
	name, err := env.client(ctx, e, inj, true)
	if err != nil {
		return inj, err
	}
	return inj, cutClient(env, name, Isolate, inj)
}

// Heal: the runner removes every toxic once, for all families.
func (isolate) Heal(context.Context, *Env) ([]string, error) { return nil, nil }

func (isolate) Describe(_ string, ts []string) string { return targets(ts) + " was isolated" }

// onlyWithClients is Kinds for a family that strikes clients: its kinds,
// or none without a workload.
func onlyWithClients(clients bool, kinds ...string) []string {
	if !clients {
		return nil
	}
	return kinds
}
