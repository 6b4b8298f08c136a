package nemesis

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/locktest/locktest/system"
)

// Ask is what a run asks of the nemesis before anything starts.
type Ask struct {
	// Config are the faults asked for (Faults: --nemesis, All unresolved),
	// completed with the run's facts: its members and their names, its
	// clients, the TTL, the time, a grant's quorum.
	Config Config
	// Seed draws the schedule.
	Seed int64
	// System is a system of the type the run starts, not started (a
	// backend's prototype): only what it offers is asked of it.
	System system.System
	// Backend names the system in a refusal.
	Backend string
	// Refuses, if set, says why the lock under test cannot suffer a fault
	// family, "" when it can (lock.Limited).
	Refuses func(family string) string
	// Default says that Config.Faults are a plain run's defaults, not the
	// user's choice: a family the system does not offer is left out, not
	// refused.
	Default bool
	// Schedule, if set, is replayed instead of drawn; Fit says it was
	// drawn for another system, and is fitted to this one.
	Schedule *Schedule
	Fit      bool
}

// Planned is a run's nemesis as planned, which Run carries out.
type Planned struct {
	// Config is the Ask's with its faults resolved (All: the families the
	// system offers) and Offers the fault kinds the run can carry out:
	// those the system offers that the lock can suffer.
	Config Config
	// Schedule is the faults the run carries out: the one replayed (fitted
	// if asked, with what the system cannot carry out in Dropped), or one
	// drawn from the seed; nil without faults.
	Schedule *Schedule
	Dropped  []Entry
	// Families are the fault families the run may inject: those of the
	// faults resolved, and those of the schedule replayed.
	Families []string
}

// Plan resolves a run's faults before anything starts, in the CLI's flag
// names where it refuses: what the lock cannot suffer, a schedule that
// does not fit the run, and a fault the system cannot carry out at all
// are refused; --nemesis all is resolved; and the schedule is drawn, or
// the one replayed checked (fitted if asked).
func Plan(a Ask) (Planned, error) {
	cfg := a.Config
	if a.Refuses != nil {
		for _, f := range cfg.Faults {
			if why := a.Refuses(f); why != "" {
				return Planned{}, fmt.Errorf("--nemesis %s: %s", f, why)
			}
		}
		if a.Schedule != nil && !a.Fit {
			for _, f := range a.Schedule.Families() {
				if why := a.Refuses(f); why != "" {
					return Planned{}, fmt.Errorf("the schedule's %s faults: %s", f, why)
				}
			}
		}
	}
	if a.Schedule != nil {
		if err := a.Schedule.Validate(); err != nil {
			return Planned{}, err
		}
		if a.Schedule.Members != cfg.Members && !a.Fit {
			return Planned{}, fmt.Errorf("the schedule is for %d members, the run has %d", a.Schedule.Members, cfg.Members)
		}
	}
	offers := Offered(a.System)
	if a.Refuses != nil {
		offers = slices.DeleteFunc(offers, func(kind string) bool { return a.Refuses(FamilyOf(kind)) != "" })
	}
	if a.Default {
		cfg.Faults = Offering(cfg.Faults, offers)
	}
	// What the system cannot carry out at all is refused now, before any
	// server starts: a family asked for by name, or a kind of the
	// schedule replayed (a fitted schedule drops what its system cannot
	// take).
	refuse := func(what, name string) error {
		lacks := Lacks(name, a.System)
		if len(lacks) == 0 {
			return nil
		}
		where := fmt.Sprintf(" (it offers %s)", strings.Join(Expand([]string{All}, offers), ", "))
		if h, ok := a.System.(system.Hinter); ok {
			where = "; " + h.Hint()
		}
		return fmt.Errorf("%s %s needs %s, which %s does not offer%s", what, name, capNames(lacks), a.Backend, where)
	}
	switch {
	case a.Schedule == nil:
		for _, name := range cfg.Faults {
			if err := refuse("--nemesis: fault", name); err != nil {
				return Planned{}, err
			}
		}
	case !a.Fit:
		for _, e := range a.Schedule.Entries {
			if err := refuse("the schedule's fault", e.Fault); err != nil {
				return Planned{}, err
			}
		}
	}
	cfg.Faults = Expand(cfg.Faults, offers)
	cfg.Offers = offers
	p := Planned{Config: cfg, Families: slices.Clone(cfg.Faults)}
	if a.Schedule != nil {
		p.Families = append(p.Families, a.Schedule.Families()...)
	}
	switch {
	case a.Schedule != nil && a.Fit:
		fitted, dropped := fit(*a.Schedule, offers, cfg.MemberNames)
		p.Schedule, p.Dropped = &fitted, dropped
	case a.Schedule != nil:
		p.Schedule = a.Schedule
	case len(cfg.Faults) > 0:
		s, err := Generate(a.Seed, cfg)
		if err != nil {
			return Planned{}, err
		}
		p.Schedule = &s
	}
	return p, nil
}

// fit fits s, drawn for another system (one schedule for runs on several
// backends), to a system with these members that offers these fault kinds
// (nil: every kind): a fault on member mI strikes member I modulo their
// number (a pause or crash of a member is one of any backend's server
// alike, and one of the leader is one of a member where there is no
// leader; a member the plan cannot name keeps mI), and a fault the system
// cannot carry out, or whose members do not fit it, is dropped and
// returned.
func fit(s Schedule, offers, members []string) (Schedule, []Entry) {
	member := func(name string) string {
		if i, err := strconv.Atoi(strings.TrimPrefix(name, "m")); err == nil && strings.HasPrefix(name, "m") && members[i%len(members)] != "" {
			return members[i%len(members)]
		}
		return name
	}
	offered := func(kind string) bool { return offers == nil || slices.Contains(offers, kind) }
	fitted := s
	fitted.Members, fitted.Entries = len(members), []Entry{}
	var dropped []Entry
	for _, e := range s.Entries {
		e.Target, e.Fallback = member(e.Target), member(e.Fallback)
		if e.Fault == CrashLeader && !offered(e.Fault) && offered(CrashMember) {
			// A system without a leader crashes a member: the leader
			// selector resolves to the entry's fallback, as a member
			// pause aimed at the leader does.
			e.Fault = CrashMember
		}
		one := Schedule{Members: len(members), Clients: s.Clients, Entries: []Entry{e}}
		if !offered(e.Fault) || one.Validate() != nil {
			dropped = append(dropped, e)
			continue
		}
		fitted.Entries = append(fitted.Entries, e)
	}
	return fitted, dropped
}

// capNames are caps in words: "leases", "partition and leader".
func capNames(caps []system.Capability) string {
	names := make([]string, len(caps))
	for i, c := range caps {
		names[i] = string(c)
	}
	return strings.Join(names, " and ")
}
