package nemesis

import (
	"context"
	"errors"
	"fmt"
	"strings"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"

	"github.com/locktest/locktest/internal/links"
)

// toxics are the toxics a fault added (and proxies it disabled), to remove
// (enable) when it stops.
type toxics []toxicRef

type toxicRef struct {
	p    *toxiclient.Proxy
	name string // "" for a disabled proxy
	cut  bool   // a toxic that drops what it carries: removed by links.RemoveCut
}

// disable makes p refuse connections (and closes those open).
func (ts *toxics) disable(p *toxiclient.Proxy) error {
	if err := p.Disable(); err != nil {
		return fmt.Errorf("disabling %s: %w", p.Name, err)
	}
	*ts = append(*ts, toxicRef{p: p})
	return nil
}

// add puts a toxic of type typ named "nemesis-<fault>-<stream>" on p in
// each stream direction.
func (ts *toxics) add(p *toxiclient.Proxy, fault, typ string, attrs toxiclient.Attributes, streams ...string) error {
	for _, s := range streams {
		name := "nemesis-" + fault + "-" + s
		if _, err := p.AddToxic(name, typ, s, 1, attrs); err != nil {
			return fmt.Errorf("toxic %s on %s: %w", name, p.Name, err)
		}
		*ts = append(*ts, toxicRef{p, name, typ == "timeout" || typ == links.ReplyToxic})
	}
	return nil
}

func (ts toxics) remove() error {
	var errs []error
	notFound := func(err error) bool { return strings.Contains(err.Error(), "not found") }
	cuts := map[*toxiclient.Proxy][]string{}
	var order []*toxiclient.Proxy
	for _, t := range ts {
		if t.cut {
			if cuts[t.p] == nil {
				order = append(order, t.p)
			}
			cuts[t.p] = append(cuts[t.p], t.name)
		}
	}
	for _, p := range order {
		if err := links.RemoveCut(p, cuts[p]...); err != nil && !notFound(err) {
			errs = append(errs, err)
		}
	}
	for _, t := range ts {
		if t.cut {
			continue
		}
		if t.name == "" {
			if err := t.p.Enable(); err != nil {
				errs = append(errs, fmt.Errorf("enabling %s: %w", t.p.Name, err))
			}
			continue
		}
		if err := t.p.RemoveToxic(t.name); err != nil && !notFound(err) {
			errs = append(errs, fmt.Errorf("removing toxic %s from %s: %w", t.name, t.p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// cut drops all data both ways on p: a timeout toxic with timeout 0 holds
// connections open and discards what they carry.
func (ts *toxics) cut(p *toxiclient.Proxy, fault string) error {
	return ts.add(p, fault, "timeout", toxiclient.Attributes{"timeout": 0}, "upstream", "downstream")
}

// cutClient cuts every link of client to the members until the fault
// stops.
func cutClient(env *Env, client, fault string, inj *Injected) error {
	links, err := need[linker](env)
	if err != nil {
		return err
	}
	var ts toxics
	inj.Stop = func(context.Context) error { return ts.remove() }
	ps, err := links.Links(client)
	if err != nil {
		return err
	}
	for _, p := range ps {
		if err := ts.cut(p, fault); err != nil {
			return err
		}
	}
	return nil
}
