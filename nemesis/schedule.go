package nemesis

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Target selectors resolved when a fault fires. Other targets name a member
// ("m1") or a client ("c2") directly.
const (
	TargetHolder = "holder" // the client holding a lock then (else Entry.Fallback)
	TargetWaiter = "waiter" // the client waiting longest in Acquire then (else Entry.Fallback)
	TargetLeader = "leader" // the leader then (else Entry.Fallback)
)

// Entry is one fault of a Schedule: what was drawn from the seed. Targets
// given by selector ("holder", "leader") are resolved when it fires; the
// history records what they resolved to.
type Entry struct {
	// At is when the fault starts, from the start of Run. A fault never
	// starts before the previous one has stopped, so with slow stops it
	// may start later.
	At    time.Duration `json:"at_ns"`
	Fault string        `json:"fault"`
	// Target is a selector ("holder", "leader"), a member ("m1") or a
	// client ("c2"); empty for faults whose targets are in Groups.
	Target string `json:"target,omitempty"`
	// Fallback is the member or client used when Target's selector finds
	// nobody (no client holds a lock, no agreed leader).
	Fallback string `json:"fallback,omitempty"`
	// Duration is how long the fault lasts (for lease-starve: the longest it
	// waits for the lease to expire). Zero for instantaneous faults
	// (lease-revoke, crash-client), or the quiet kept after one (the
	// holder's revocation an aimed schedule opens with).
	Duration time.Duration `json:"duration_ns"`
	// Groups are member indices for partitions: for partition-majority
	// [minority, majority]; for partition-bridge [side, bridge, side]; for
	// partition-majorities-ring one list, the ring order, in which each
	// member sees its nearest neighbours.
	Groups [][]int `json:"groups,omitempty"`
	// Sides place clients in a partition: the index of the client's group
	// (partition-one and partition-leader: 0 with the isolated member, 1
	// with the rest), or for the ring the client's position in the ring. A
	// client reaches the members its side's members reach.
	Sides map[string]int `json:"sides,omitempty"`
	// Params are fault parameters, recorded in the history as they are.
	// Partitions: links=refuse (a client's links to members it does not
	// reach refuse connections; the default) or links=drop (they silently
	// drop data).
	Params map[string]string `json:"params,omitempty"`
}

// Schedule is a sequence of faults, generated from a seed or read from a
// file.
type Schedule struct {
	Seed    int64    `json:"seed"`
	Members int      `json:"members"`
	Clients []string `json:"clients"`
	Entries []Entry  `json:"entries"`
}

// Generate draws a schedule from seed: a pure function of seed and cfg
// (its Faults, Interval, Time, Members, Clients and durations). Each fault
// starts a gap (Interval; a quarter of it in a dense schedule) after the
// previous one's drawn end, the first a gap after the start; the family is drawn
// uniformly from cfg.Faults, then the kind within it (by the family's
// weights, if it has them). Targets favour the
// lock holder and the leader. cfg.Swarm, cfg.Aim and cfg.Dense change the
// draw (swarm.go); without them a seed draws what it always drew.
func Generate(seed int64, cfg Config) (Schedule, error) {
	cfg = cfg.WithDefaults()
	cfg.Faults = Expand(cfg.Faults, cfg.Offers)
	s := Schedule{Seed: seed, Members: cfg.Members, Clients: slices.Clone(cfg.Clients)}
	if s.Clients == nil {
		s.Clients = []string{}
	}
	for _, f := range cfg.Faults {
		if _, ok := family(f); !ok {
			return s, fmt.Errorf("nemesis: unknown fault %q", f)
		}
	}
	if cfg.Members < 1 {
		return s, fmt.Errorf("nemesis: %d members", cfg.Members)
	}
	clients := len(cfg.Clients) > 0
	var fams []Family
	for _, f := range families {
		if slices.Contains(cfg.Faults, f.Spec().Name) && len(cfg.kinds(f, clients)) > 0 {
			fams = append(fams, f)
		}
	}
	every := slices.Clone(fams) // steered cells are drawn from every family
	if cfg.Swarm {
		fams = swarm(seed, fams)
	}
	s.Entries = []Entry{}
	if len(fams) == 0 {
		return s, nil
	}

	g := &Gen{rng: rand.New(rand.NewPCG(uint64(seed), 0x6e656d65736973)), cfg: cfg, steer: slices.Concat(cfg.Steer, cfg.Steer)}
	// An aimed schedule opens with a strike of each class (opening.go); a
	// steered one with its cells.
	start := cfg.gap()
	var opened int
	if len(cfg.Steer) == 0 && cfg.Aim {
		for _, o := range cfg.openings(seed, fams) {
			o.At = start
			s.Entries = append(s.Entries, o)
			start += o.Duration + cfg.gap()
			opened++
		}
	}
	for at := start; at < cfg.Time; {
		f, e, steered := g.steered(every, clients, at)
		if !steered {
			f = g.family(fams)
			e = Entry{Fault: g.kind(cfg.kinds(f, clients)), Params: map[string]string{}}
			f.Draw(g, &e, cfg.Durations[f.Spec().Name])
		}
		if len(e.Params) == 0 {
			e.Params = nil
		}
		e.At = at
		for _, b := range g.before {
			b.At = at
			s.Entries = append(s.Entries, b)
			// Counted whole, though it may end sooner: the entries after
			// it do not pile up behind it.
			at += b.Duration
		}
		g.before = g.before[:0]
		s.Entries = append(s.Entries, e)
		if f.Spec().OncePerRun {
			fams = slices.DeleteFunc(fams, func(o Family) bool { return o == f })
			every = slices.DeleteFunc(every, func(o Family) bool { return o == f })
			if len(fams) == 0 {
				break
			}
		}
		at += e.Duration + cfg.gap()
		if steered {
			// Placed where the real system lets it: after the fault has
			// started and stopped (a restart, a member rejoining).
			at += settle(f, e.Fault)
			g.placed++
		}
	}
	if cfg.Aim {
		aimLost(seed, &s, cfg)
		aimAt(seed, &s, cfg.TTL)
		if opened > 0 {
			lostAcquireEarly(seed, cfg, fams, &s, opened)
		}
	}
	return s, nil
}

// lostAcquireEarly has an aimed schedule strike a lost acquire reply
// right after its openings (opening.go): the first of s that strikes an
// acquire's request (lostCreate), or, where the system offers them and s
// has none, the holder's next acquire's, drawn from the seed on a stream
// of its own. Most faults of a run come late, waiting for their moment or
// the fault before, and those drawn late often never run; the opening
// strike loses a release's reply, this an acquire's, the other reply whose
// loss leaves a claim in doubt (its request created it; a client that
// creates it again leaves the first behind: ZooKeeper's ghost node). It
// takes the time of the first entry after the opening, and the entries it
// passes move later by its duration and gap: those after it keep their
// times.
func lostAcquireEarly(seed int64, cfg Config, fams []Family, s *Schedule, opened int) {
	es := s.Entries[opened:]
	if len(es) == 0 {
		return
	}
	i := slices.IndexFunc(es, lostCreate)
	switch {
	case i == 0:
		return
	case i < 0:
		if !cfg.offersKind(fams, LostReplyAcquire) {
			return
		}
		rng := rand.New(rand.NewPCG(uint64(seed), lostStream+3))
		e := Entry{Fault: LostReplyAcquire, Target: TargetHolder, Fallback: cfg.Clients[rng.IntN(len(cfg.Clients))],
			Duration: lostDur(rng, cfg.Durations[lostReply{}.Spec().Name])}
		// Drawn last, and moved first below, as one drawn there.
		s.Entries = append(s.Entries, e)
		es = s.Entries[opened:]
		i = len(es) - 1
	}
	e := es[i]
	d := e.Duration + cfg.gap()
	e.At = es[0].At
	copy(es[1:i+1], es[:i])
	for k := 1; k <= i; k++ {
		es[k].At += d
	}
	es[0] = e
}

// lostCreate says whether e loses the reply to an acquire's request, which
// creates the client's claim: the holder's next acquire, or a client's
// next; not a waiter's in flight, whose claim is made already.
func lostCreate(e Entry) bool { return e.Fault == LostReplyAcquire && e.Target != TargetWaiter }

// Gen draws a schedule's entries from its seed; families draw through it.
type Gen struct {
	rng *rand.Rand
	cfg Config
	// before are entries a Draw places before its own, at the same time:
	// the strike starts as soon as they stop.
	before []Entry
	// steer are the steered cells not yet drawn (Config.Steer, twice),
	// and placed how many of them the schedule holds.
	steer  []Cell
	placed int
}

// kind draws one of ks, f's kinds, in proportion to their weights.
func (g *Gen) kind(ks []string) string {
	weight := func(name string) int {
		if k, _, _ := kindOf(name); k.Weight > 0 {
			return k.Weight
		}
		return 1
	}
	total := 0
	for _, k := range ks {
		total += weight(k)
	}
	n := g.rng.IntN(total)
	for _, k := range ks {
		if n -= weight(k); n < 0 {
			return k
		}
	}
	return ks[len(ks)-1]
}

func (g *Gen) dur(r Range) time.Duration {
	if r.Max <= r.Min {
		return r.Min
	}
	// Whole milliseconds keep the schedule readable.
	ms := int64(r.Min/time.Millisecond) + g.rng.Int64N(int64((r.Max-r.Min)/time.Millisecond)+1)
	return time.Duration(ms) * time.Millisecond
}

func (g *Gen) between(lo, hi time.Duration) time.Duration { return g.dur(Range{lo, hi}) }

func (g *Gen) chance(p float64) bool { return g.rng.Float64() < p }

func (g *Gen) client() string { return g.cfg.Clients[g.rng.IntN(len(g.cfg.Clients))] }

func (g *Gen) member() string { return g.memberName(g.rng.IntN(g.cfg.Members)) }

func (g *Gen) memberName(i int) string {
	if i < len(g.cfg.MemberNames) {
		return g.cfg.MemberNames[i]
	}
	return "m" + strconv.Itoa(i)
}

// bareQuorumChance is how often a crash or clock jump of a member strikes
// a holder granted on a bare quorum, when the system has one.
const bareQuorumChance = 0.7

// bareQuorumPause bounds the pause before a strike on a bare quorum: it
// ends at the grant it waits for, and strikes anyway after this long.
const bareQuorumPause = 8 * time.Second

// bareQuorum, with cfg.Quorum set, has e strike a member under a holder
// granted on a bare quorum (with probability bareQuorumChance; it reports
// whether it did): a pause-member entry goes first, of the members but
// Quorum of them, Target not among them, until a client is granted the
// lock (one entering a section of at least a TTL), so that it holds the
// lock on Target and the others only. One crash or clock jump of Target
// then leaves it short of a quorum while another client can be granted
// one: Kleppmann's Redlock counterexamples.
func (g *Gen) bareQuorum(e *Entry) bool {
	n, q := g.cfg.Members, g.cfg.Quorum
	if q <= 0 || q >= n || !g.chance(bareQuorumChance) {
		return false
	}
	perm := g.rng.Perm(n)
	e.Target = g.memberName(perm[0])
	var with []string
	paused := sorted(perm[1 : 1+n-q])
	for _, i := range paused[1:] {
		with = append(with, g.memberName(i))
	}
	g.before = append(g.before, Entry{Fault: PauseMember, Target: g.memberName(paused[0]), Duration: bareQuorumPause,
		Params: map[string]string{"with": strings.Join(with, ","), "until": "grant", "ahead": g.cfg.TTL.String() + "-"}})
	return true
}

// clientTarget favours the holder with probability p.
func (g *Gen) clientTarget(e *Entry, p float64) { g.roleTarget(e, p, 0) }

// roleTarget strikes the holder with probability holder, a waiter (a
// client queued in Acquire, where lock bugs such as etcd#11456 live) with
// probability waiter, and otherwise a client drawn now. One draw decides,
// as clientTarget's did, so other entries of a schedule keep their draws.
func (g *Gen) roleTarget(e *Entry, holder, waiter float64) {
	e.Fallback = g.client()
	switch u := g.rng.Float64(); {
	case u < holder:
		e.Target = TargetHolder
	case u < holder+waiter:
		e.Target = TargetWaiter
	default:
		e.Target, e.Fallback = e.Fallback, ""
	}
}

// aim has a fault on the holder wait for a holder entering a critical
// section of think time in [min, max] (max 0: no bound): one with work
// ahead, which the fault can harm.
func (g *Gen) aim(e *Entry, min, max time.Duration) {
	if e.Target != TargetHolder {
		return
	}
	a := min.String() + "-"
	if max > 0 {
		a += max.String()
	}
	e.Params["ahead"] = a
}

// sides places every client in one of n groups.
func (g *Gen) sides(n int) map[string]int {
	m := map[string]int{}
	for _, c := range g.cfg.Clients {
		m[c] = g.rng.IntN(n)
	}
	return m
}

func sorted(xs []int) []int {
	ys := slices.Clone(xs)
	slices.Sort(ys)
	return ys
}

// Validate checks that every entry is well-formed for the schedule's
// cluster size.
func (s Schedule) Validate() error {
	if s.Members < 1 {
		return fmt.Errorf("nemesis: schedule for %d members", s.Members)
	}
	var errs []error
	for i, e := range s.Entries {
		if err := e.validate(s.Members); err != nil {
			errs = append(errs, fmt.Errorf("nemesis: schedule entry %d (%s): %w", i, e.Fault, err))
		}
	}
	return errors.Join(errs...)
}

func (e Entry) validate(n int) error {
	f, ok := familyOf(e.Fault)
	if !ok {
		return errors.New("unknown fault kind")
	}
	if e.At < 0 || e.Duration < 0 {
		return errors.New("negative time")
	}
	if a, ok := e.Params["ahead"]; ok {
		if e.Target != TargetHolder && e.Target != TargetWaiter && e.Params["until"] != "grant" {
			return errors.New("param ahead aims at a holder's section: the target must be " + TargetHolder + " or " + TargetWaiter + ", or the grant awaited (until=grant)")
		}
		if _, _, err := parseAhead(a); err != nil {
			return err
		}
	}
	for _, k := range []string{"waited", "giving_up", "queue"} {
		if w, ok := e.Params[k]; ok {
			if d, err := time.ParseDuration(w); err != nil || d < 0 || e.Target != TargetWaiter {
				return fmt.Errorf("param %s %q: want a duration, on a fault aimed at a %s", k, w, TargetWaiter)
			}
		}
	}
	seen := map[int]bool{}
	for _, g := range e.Groups {
		for _, m := range g {
			if m < 0 || m >= n || seen[m] {
				return fmt.Errorf("bad member %d in groups", m)
			}
			seen[m] = true
		}
	}
	spec := f.Spec()
	if !spec.Untargeted {
		if err := needTarget(e); err != nil {
			return err
		}
	}
	if err := checkParams(e, spec.DurationParams, spec.NumberParams); err != nil {
		return err
	}
	if c, ok := f.(entryChecker); ok {
		return c.Check(e, n)
	}
	return nil
}

// needTarget is Check for the faults that strike one member or client.
func needTarget(e Entry) error {
	if e.Target == "" {
		return errors.New("no target")
	}
	return nil
}

// checkParams checks that e's params named in durations parse as
// durations and those in numbers as numbers, where present.
func checkParams(e Entry, durations, numbers []string) error {
	for _, k := range durations {
		if v, ok := e.Params[k]; ok {
			if _, err := time.ParseDuration(v); err != nil {
				return fmt.Errorf("param %s: %w", k, err)
			}
		}
	}
	for _, k := range numbers {
		if v, ok := e.Params[k]; ok {
			if _, err := strconv.ParseFloat(v, 64); err != nil {
				return fmt.Errorf("param %s: %w", k, err)
			}
		}
	}
	return nil
}

// StagesNext says whether entry i of s stages the entry after it: a pause
// that lasts until a grant (Gen.bareQuorum), followed at the same time by
// the strike that needs it. Without the first, the second strikes another
// holder: the two stand or fall together.
func (s Schedule) StagesNext(i int) bool {
	es := s.Entries
	return i+1 < len(es) && es[i].Params["until"] == "grant" && es[i+1].At == es[i].At
}

// Families names the fault families of the schedule's entries.
func (s Schedule) Families() []string {
	var out []string
	for _, e := range s.Entries {
		if f, ok := familyOf(e.Fault); ok && !slices.Contains(out, f.Spec().Name) {
			out = append(out, f.Spec().Name)
		}
	}
	return out
}

// WriteFile writes the schedule as indented JSON.
func (s Schedule) WriteFile(path string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadFile reads a schedule written by WriteFile and validates it.
func ReadFile(path string) (Schedule, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Schedule{}, err
	}
	var s Schedule
	if err := json.Unmarshal(b, &s); err != nil {
		return Schedule{}, fmt.Errorf("nemesis: schedule %s: %w", path, err)
	}
	if err := s.Validate(); err != nil {
		return Schedule{}, fmt.Errorf("nemesis: schedule %s: %w", path, err)
	}
	return s, nil
}
