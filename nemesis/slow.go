package nemesis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"

	"github.com/locktest/locktest/system"
)

// Slow puts a latency (with jitter), bandwidth or reset toxic on a client's
// links to the members (param link: the name Config.MemberLinks gives
// them), its link to the resource ("resource"), or both ("all").
const Slow = "slow"

type slow struct{}

// Spec says what the family is, as data.
func (slow) Spec() Spec {
	return Spec{
		Name: "slow",
		Doc:  "Latency with jitter, bandwidth limits or resets on any link, including the resource's.",
		Kinds: []Kind{{Name: Slow, Needs: []system.Capability{system.CapLinks}, Clients: true, Says: func(ts []string, _ map[string]string) string {
			return "the network of " + targets(ts) + " was slowed"
		}}},
		Durations:      fixed(2*time.Second, 4*time.Second),
		DurationParams: []string{"latency", "jitter", "after", "trip"},
		NumberParams:   []string{"rate_kb"},
	}
}

// A slow fault's links besides the members': the resource's, and all.
const (
	linkResource = "resource"
	linkAll      = "all"
)

// memberLinks is what a slow fault calls the clients' links to the members.
func (g *Gen) memberLinks() string {
	if g.cfg.MemberLinks == "" {
		return "members"
	}
	return g.cfg.MemberLinks
}

func (slow) Draw(g *Gen, e *Entry, d Range) {
	g.clientTarget(e, 0.6)
	links := []string{g.memberLinks(), linkResource, linkAll}
	e.Params["link"] = links[g.rng.IntN(len(links))]
	switch g.rng.IntN(3) {
	case 0, 1:
		e.Params["toxic"] = "latency"
		// Up to past the TTL: a write to the resource held that long
		// lands after the writer's lease expired.
		e.Params["latency"] = g.between(20*time.Millisecond, g.cfg.TTL+time.Second).String()
		e.Params["jitter"] = g.between(0, 200*time.Millisecond).String()
	case 2:
		if g.chance(0.5) {
			e.Params["toxic"] = "bandwidth"
			e.Params["rate_kb"] = strconv.Itoa(1 + g.rng.IntN(32))
		} else {
			e.Params["toxic"] = "reset"
			e.Params["after"] = g.between(0, 500*time.Millisecond).String()
		}
	}
	e.Duration = g.dur(d)
}

func (slow) Inject(ctx context.Context, env *Env, e Entry) (*Injected, error) {
	inj := &Injected{Params: map[string]string{}}
	links, err := need[linker](env)
	if err != nil {
		return inj, err
	}
	if e.Params["try"] != "" && env.watchStruck {
		// The lost-watch opening's try before struck the race.
		return inj, errNotStruck
	}
	name, err := env.client(ctx, e, inj, false)
	if err != nil {
		return inj, err
	}
	var ps []*toxiclient.Proxy
	if l := e.Params["link"]; l != "" && l != linkResource {
		members, err := links.Links(name)
		if err != nil {
			return inj, err
		}
		ps = append(ps, members...)
	}
	if l := e.Params["link"]; l == linkResource || l == linkAll {
		p, err := links.ResourceLink(name)
		if err != nil {
			return inj, err
		}
		ps = append(ps, p)
	}
	if len(ps) == 0 {
		return inj, fmt.Errorf("no links for link=%q", e.Params["link"])
	}
	ms := func(k string) int {
		d, _ := time.ParseDuration(e.Params[k])
		return int(d / time.Millisecond)
	}
	var ts toxics
	inj.Stop = func(context.Context) error { return ts.remove() }
	if t, _ := time.ParseDuration(e.Params["trip"]); t > 0 {
		// The lost-watch opening: held as the race of w's next listing
		// and watch asks.
		inj.Hold = func(ctx context.Context, d time.Duration) map[string]string { return env.lostWatch(ctx, name, t, d) }
	}
	for _, p := range ps {
		var err error
		switch e.Params["toxic"] {
		case "latency":
			// Upstream: requests (a write to the resource) arrive late.
			err = ts.add(p, Slow, "latency", toxiclient.Attributes{"latency": ms("latency"), "jitter": ms("jitter")}, "upstream")
		case "bandwidth":
			kb, _ := strconv.Atoi(e.Params["rate_kb"])
			err = ts.add(p, Slow, "bandwidth", toxiclient.Attributes{"rate": kb}, "upstream", "downstream")
		case "reset":
			err = ts.add(p, Slow, "reset_peer", toxiclient.Attributes{"timeout": ms("after")}, "upstream")
		default:
			err = fmt.Errorf("unknown slow toxic %q", e.Params["toxic"])
		}
		if err != nil {
			return inj, err
		}
	}
	return inj, nil
}
