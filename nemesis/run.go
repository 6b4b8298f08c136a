package nemesis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locktest/locktest/cluster"
	"github.com/locktest/locktest/histories"
)

// Fired is one fault as Run carried it out.
type Fired struct {
	Entry   int               `json:"entry"` // index in the schedule
	Fault   string            `json:"fault"`
	Targets []string          `json:"targets"`
	Params  map[string]string `json:"params,omitempty"`
	Start   time.Duration     `json:"start_ns"` // since Run began
	Stop    time.Duration     `json:"stop_ns"`
	Error   string            `json:"error,omitempty"`
}

// Report is what Run did.
type Report struct {
	Faults    []Fired       `json:"faults"`
	Heal      time.Duration `json:"heal_ns"` // how long the final heal took
	HealError string        `json:"heal_error,omitempty"`
}

// Run carries out sched against the cluster and the workload's clients,
// one fault at a time, each at its entry's At (measured from the call) or
// as soon as the previous one stopped, until the schedule is done and ctx
// ends. A fault in force when ctx ends is stopped at once. Then everything
// is healed: member partitions mended, paused members resumed, stopped
// members restarted, every toxic removed and proxy enabled, every client
// clock reset, client pauses waited out, and a leader agreed on.
//
// Each fault's start and stop is recorded through rec as an "info"
// operation of process "nemesis", f "start"/"stop", value {fault, targets,
// params} with the targets as resolved; the final heal is f "heal" with
// fault "all". A fault that fails to start is recorded as start and stop
// with the error. Run returns an error only for an unusable schedule or a
// failed heal.
func Run(ctx context.Context, cfg Config, c *cluster.Cluster, cl Clients, rec Recorder, sched Schedule) (Report, error) {
	cfg = cfg.WithDefaults()
	r := &runner{cfg: cfg, c: c, cl: cl, rec: rec, start: time.Now(), rep: Report{Faults: []Fired{}}}
	if err := sched.Validate(); err != nil {
		return r.rep, err
	}
	if n := len(c.Members()); sched.Members != n {
		return r.rep, fmt.Errorf("nemesis: schedule is for %d members, the cluster has %d", sched.Members, n)
	}
	for i, e := range sched.Entries {
		if !sleepUntil(ctx, r.start.Add(e.At)) {
			break
		}
		r.fire(ctx, i, e)
	}
	<-ctx.Done()
	err := r.heal()
	return r.rep, err
}

type runner struct {
	cfg   Config
	c     *cluster.Cluster
	cl    Clients
	rec   Recorder
	start time.Time
	rep   Report
}

// active is a fault in force.
type active struct {
	targets []string
	params  map[string]string
	// hold, if set, replaces waiting out the entry's duration; it returns
	// params to add to the stop event.
	hold func(ctx context.Context, d time.Duration) map[string]string
	// stop undoes the fault.
	stop func(ctx context.Context) error
}

func (r *runner) since() time.Duration { return time.Since(r.start) }

func (r *runner) record(f, fault string, targets []string, params map[string]string, err error) {
	if r.rec == nil {
		return
	}
	op := histories.Op{
		Type: histories.Info, F: f, Process: histories.Nemesis,
		Value: &histories.Value{Fault: fault, Targets: targets, Params: params},
	}
	if err != nil {
		op.Error = err.Error()
	}
	if _, err := r.rec.Record(op); err != nil {
		r.cfg.logf("nemesis: recording %s %s: %v", f, fault, err)
	}
}

func (r *runner) fire(ctx context.Context, i int, e Entry) {
	fired := Fired{Entry: i, Fault: e.Fault, Start: r.since()}
	a, err := r.startFault(ctx, e)
	if a == nil {
		a = &active{}
	}
	params := maps.Clone(e.Params)
	if params == nil {
		params = map[string]string{}
	}
	maps.Copy(params, a.params)
	if e.Duration > 0 {
		params["duration"] = e.Duration.String()
	}
	if a.targets == nil {
		a.targets = []string{}
	}
	fired.Targets, fired.Params = a.targets, params
	r.record(histories.FStart, e.Fault, a.targets, params, err)
	if err != nil {
		fired.Error = err.Error()
		r.cfg.logf("nemesis: %s: %v", e.Fault, err)
	} else {
		r.cfg.logf("nemesis %6.2fs: %s %s%s", fired.Start.Seconds(), e.Fault, strings.Join(a.targets, ","), formatParams(params))
		if a.hold != nil {
			extra := a.hold(ctx, e.Duration)
			params = maps.Clone(params)
			maps.Copy(params, extra)
			fired.Params = params
		} else {
			sleepUntil(ctx, time.Now().Add(e.Duration))
		}
	}
	if a.stop != nil {
		sctx, cancel := context.WithTimeout(context.Background(), r.cfg.HealTimeout)
		serr := a.stop(sctx)
		cancel()
		if serr != nil {
			r.cfg.logf("nemesis: stopping %s: %v", e.Fault, serr)
			err = errors.Join(err, serr)
			fired.Error = err.Error()
		}
	}
	if len(a.params) > 0 { // stop may have noted more
		params = maps.Clone(params)
		maps.Copy(params, a.params)
		fired.Params = params
	}
	fired.Stop = r.since()
	r.record(histories.FStop, e.Fault, a.targets, params, err)
	r.rep.Faults = append(r.rep.Faults, fired)
}

// heal undoes everything any fault may have left behind.
func (r *runner) heal() error {
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.HealTimeout)
	defer cancel()
	var errs []error
	if err := r.c.Heal(); err != nil {
		errs = append(errs, err)
	}
	var healed []string
	for i, m := range r.c.Members() {
		if r.c.Paused(i) {
			healed = append(healed, m.Name)
			if err := r.c.ResumeMember(i); err != nil {
				errs = append(errs, err)
			}
		}
		if !r.c.Running(i) {
			healed = append(healed, m.Name)
			if err := r.c.RestartMember(ctx, i); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := r.c.ClearToxics(); err != nil {
		errs = append(errs, err)
	}
	if r.cl != nil {
		// A pause armed for a client's next write would strike after the
		// heal: disarm it. Pauses under way end by themselves.
		var until time.Time
		for _, n := range r.cl.Names() {
			r.cl.ResetClock(n)
			armed, end := r.cl.Disarm(n)
			if armed {
				healed = append(healed, n)
			}
			if end.After(until) {
				until = end
			}
		}
		if !sleepUntil(ctx, until) {
			errs = append(errs, errors.New("nemesis: heal: a client pause outlasted the heal timeout"))
		}
	}
	if err := r.c.WaitLeader(ctx); err != nil {
		errs = append(errs, err)
	}
	err := errors.Join(errs...)
	r.rep.Heal = time.Since(began)
	params := map[string]string{"took": r.rep.Heal.Round(time.Millisecond).String()}
	if healed == nil {
		healed = []string{}
	}
	r.record(histories.FHeal, histories.HealAll, slices.Compact(healed), params, err)
	if err != nil {
		r.rep.HealError = err.Error()
		r.cfg.logf("nemesis: heal: %v", err)
	}
	return err
}

// sleepUntil waits until t; false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// --- targets ---

// freshGrantWait bounds how long a fault that should hit a holder early in
// its critical section waits for the next grant.
const freshGrantWait = 2 * time.Second

// client resolves a client target, noting how in params, and the role the
// client had when struck. Isolation and lease faults wait (briefly) for a
// fresh grant and strike its holder, so that the holder still has its
// critical section ahead of it when its lease runs out: that is when it does
// damage. A waiter target waits (as briefly) for a client queued in Acquire.
func (r *runner) client(ctx context.Context, e Entry, params map[string]string) (string, error) {
	name, err := r.resolveClient(ctx, e, params)
	if err == nil && r.cl != nil {
		params["role"] = r.cl.Role(name)
	}
	return name, err
}

// minWaiterWait is how long a client must have waited in Acquire to count
// as a waiter: long enough to be queued behind a holder.
const minWaiterWait = 20 * time.Millisecond

func (r *runner) resolveClient(ctx context.Context, e Entry, params map[string]string) (string, error) {
	if e.Target != TargetHolder && e.Target != TargetWaiter {
		return e.Target, nil
	}
	params["selector"] = e.Target
	if r.cl != nil {
		wctx, cancel := context.WithTimeout(ctx, freshGrantWait)
		defer cancel()
		if e.Target == TargetWaiter {
			for {
				if w, ok := r.cl.Waiter(minWaiterWait); ok {
					return w, nil
				}
				if !sleepUntil(wctx, time.Now().Add(5*time.Millisecond)) {
					break
				}
			}
		} else {
			h, tok, ok := r.cl.Holder("")
			if e.Fault == Isolate || e.Fault == LeaseStarve || e.Fault == LeaseRevoke {
				for wctx.Err() == nil {
					if nh, ntok, nok := r.cl.Holder(""); nok && ntok != tok {
						h, ok = nh, true
						params["fresh_grant"] = "true"
						break
					}
					sleepUntil(wctx, time.Now().Add(5*time.Millisecond))
				}
			}
			if ok {
				return h, nil
			}
		}
	}
	if e.Fallback == "" {
		return "", fmt.Errorf("no client is the %s and no fallback", e.Target)
	}
	params["resolved"] = "fallback"
	return e.Fallback, nil
}

// member resolves a member target to its index, noting how in params.
func (r *runner) member(ctx context.Context, e Entry, params map[string]string) (int, error) {
	name := e.Target
	if name == TargetLeader {
		params["selector"] = TargetLeader
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		m, err := r.c.Leader(lctx)
		cancel()
		if err == nil {
			return m.Index, nil
		}
		if e.Fallback == "" {
			return 0, err
		}
		params["resolved"] = "fallback"
		name = e.Fallback
	}
	i, ok := r.c.MemberIndex(name)
	if !ok {
		return 0, fmt.Errorf("no member %q", name)
	}
	return i, nil
}

func (r *runner) admin() (*clientv3.Client, error) { return r.c.AdminClient() }

// targetClient resolves the entry's client target and records it.
func (r *runner) targetClient(ctx context.Context, e Entry, a *active) (string, error) {
	if err := r.needClients(); err != nil {
		return "", err
	}
	name, err := r.client(ctx, e, a.params)
	if err != nil {
		return "", err
	}
	a.targets = []string{name}
	return name, nil
}

// holderLease resolves the entry's client target and its session lease,
// noted in the fault's params, and the admin client that acts on the lease
// from outside.
func (r *runner) holderLease(ctx context.Context, e Entry, a *active) (string, clientv3.LeaseID, *clientv3.Client, error) {
	name, err := r.targetClient(ctx, e, a)
	if err != nil {
		return "", 0, nil, err
	}
	hex, ok := r.cl.Lease(name)
	if !ok {
		return "", 0, nil, fmt.Errorf("client %s has no session lease", name)
	}
	a.params["lease"] = hex
	lease, err := strconv.ParseInt(hex, 16, 64)
	if err != nil {
		return "", 0, nil, fmt.Errorf("client %s: lease %q: %w", name, hex, err)
	}
	admin, err := r.admin()
	return name, clientv3.LeaseID(lease), admin, err
}

// --- toxics ---

// toxics are the toxics a fault added (and proxies it disabled), to remove
// (enable) when it stops.
type toxics []toxicRef

type toxicRef struct {
	p    *toxiclient.Proxy
	name string // "" for a disabled proxy
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
		*ts = append(*ts, toxicRef{p, name})
	}
	return nil
}

func (ts toxics) remove() error {
	var errs []error
	for _, t := range ts {
		if t.name == "" {
			if err := t.p.Enable(); err != nil {
				errs = append(errs, fmt.Errorf("enabling %s: %w", t.p.Name, err))
			}
			continue
		}
		if err := t.p.RemoveToxic(t.name); err != nil && !strings.Contains(err.Error(), "not found") {
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

// --- faults ---

func (r *runner) startFault(ctx context.Context, e Entry) (*active, error) {
	a := &active{params: map[string]string{}}
	var err error
	switch e.Fault {
	case PartitionOne, PartitionLeader, PartitionMajority, PartitionMajoritiesRing, PartitionBridge:
		err = r.partition(ctx, e, a)
	case Isolate:
		err = r.isolate(ctx, e, a)
	case LeaseStarve:
		err = r.leaseStarve(ctx, e, a)
	case LeaseRevoke:
		err = r.leaseRevoke(ctx, e, a)
	case ClockBump, ClockStrobe, ClockRate:
		err = r.clock(ctx, e, a)
	case PauseClient:
		err = r.pauseClient(ctx, e, a)
	case PauseMember:
		err = r.pauseMember(ctx, e, a)
	case CrashMember, CrashLeader:
		err = r.crashMember(ctx, e, a)
	case CrashClient:
		err = r.crashClient(ctx, e, a)
	case Slow:
		err = r.slow(ctx, e, a)
	default:
		err = fmt.Errorf("unknown fault %q", e.Fault)
	}
	return a, err
}

func (r *runner) needClients() error {
	if r.cl == nil {
		return errors.New("no clients")
	}
	return nil
}

// partition cuts members apart and each client's links to the members its
// side does not reach: with param links=drop by a timeout toxic (data is
// dropped, connections hang: the client's requests routed there time out),
// otherwise (links=refuse) by disabling the proxies (connections are closed
// and refused, so the client's balancer routes to the members it reaches).
func (r *runner) partition(ctx context.Context, e Entry, a *active) error {
	ms := r.c.Members()
	n := len(ms)
	groups := e.Groups
	switch e.Fault {
	case PartitionOne, PartitionLeader:
		i, err := r.member(ctx, e, a.params)
		if err != nil {
			return err
		}
		rest := []int{}
		for j := range n {
			if j != i {
				rest = append(rest, j)
			}
		}
		groups = [][]int{{i}, rest}
	}
	reach := Reach(e.Fault, groups, n)
	var pairs [][2]int
	for x := range n {
		for y := x + 1; y < n; y++ {
			if !reach[x][y] {
				pairs = append(pairs, [2]int{x, y})
			}
		}
	}
	// Targets: the isolated member or minority; for ring and bridge, all.
	switch e.Fault {
	case PartitionMajoritiesRing, PartitionBridge:
		for _, m := range ms {
			a.targets = append(a.targets, m.Name)
		}
	default:
		for _, i := range groups[0] {
			a.targets = append(a.targets, ms[i].Name)
		}
	}
	a.params["groups"] = formatGroups(e.Fault, groups, ms)

	var ts toxics
	a.stop = func(context.Context) error { return errors.Join(r.c.Heal(), ts.remove()) }
	if err := r.c.SetCuts(pairs); err != nil {
		return err
	}
	if r.cl == nil {
		return nil
	}
	var place []string
	for _, name := range r.cl.Names() {
		side, ok := e.Sides[name]
		if !ok {
			side = len(groups) - 1 // unplaced clients join the last (majority) group
			if e.Fault == PartitionMajoritiesRing {
				side = 0
			}
		}
		var home int
		if e.Fault == PartitionMajoritiesRing {
			home = groups[0][side%n]
		} else {
			home = groups[min(side, len(groups)-1)][0]
		}
		var sees []string
		for j := range n {
			if reach[home][j] {
				sees = append(sees, ms[j].Name)
				continue
			}
			p, err := r.c.Link(name, j)
			if err != nil {
				return err
			}
			if e.Params["links"] == "drop" {
				err = ts.cut(p, "partition")
			} else {
				err = ts.disable(p)
			}
			if err != nil {
				return err
			}
		}
		place = append(place, name+":"+strings.Join(sees, "+"))
	}
	a.params["clients"] = strings.Join(place, " ")
	return nil
}

// Reach returns which members reach which under a partition fault with the
// given groups (see Entry.Groups; for partition-one and partition-leader
// [[isolated], rest]).
func Reach(fault string, groups [][]int, n int) [][]bool {
	reach := make([][]bool, n)
	for i := range reach {
		reach[i] = make([]bool, n)
		reach[i][i] = true
	}
	switch fault {
	case PartitionMajoritiesRing:
		pos := make([]int, n)
		for k, m := range groups[0] {
			pos[m] = k
		}
		// Each member sees the k nearest on either side: itself and 2k
		// others, at least a majority.
		k := (n/2 + 1) / 2
		for x := range n {
			for y := range n {
				d := pos[x] - pos[y]
				if d < 0 {
					d = -d
				}
				reach[x][y] = min(d, n-d) <= k
			}
		}
	default:
		group := make([]int, n)
		for i := range group {
			group[i] = -1 - i
		}
		for g, ms := range groups {
			for _, m := range ms {
				group[m] = g
			}
		}
		for x := range n {
			for y := range n {
				reach[x][y] = group[x] == group[y] ||
					fault == PartitionBridge && (group[x] == 1 || group[y] == 1)
			}
		}
	}
	return reach
}

func formatGroups(fault string, groups [][]int, ms []*cluster.Member) string {
	var gs []string
	for _, g := range groups {
		var names []string
		for _, i := range g {
			names = append(names, ms[i].Name)
		}
		gs = append(gs, strings.Join(names, ","))
	}
	if fault == PartitionMajoritiesRing {
		return "ring:" + strings.Join(gs, "")
	}
	return strings.Join(gs, "|")
}

// isolate cuts one client from every member; its resource link stays.
func (r *runner) isolate(ctx context.Context, e Entry, a *active) error {
	name, err := r.targetClient(ctx, e, a)
	if err != nil {
		return err
	}
	return r.cutClient(name, Isolate, a)
}

// cutClient cuts every etcd link of a client until the fault stops.
func (r *runner) cutClient(name, fault string, a *active) error {
	var ts toxics
	a.stop = func(context.Context) error { return ts.remove() }
	links, err := r.c.Links(name)
	if err != nil {
		return err
	}
	for _, p := range links {
		if err := ts.cut(p, fault); err != nil {
			return err
		}
	}
	return nil
}

// leaseStarve cuts the holder's etcd links until the server has expired
// its session lease (or the entry's duration passes).
func (r *runner) leaseStarve(ctx context.Context, e Entry, a *active) error {
	name, lease, admin, err := r.holderLease(ctx, e, a)
	if err != nil {
		return err
	}
	if err := r.cutClient(name, LeaseStarve, a); err != nil {
		return err
	}
	cutAt := time.Now()
	a.hold = func(ctx context.Context, d time.Duration) map[string]string {
		hctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		for {
			qctx, qcancel := context.WithTimeout(hctx, 500*time.Millisecond)
			resp, err := admin.TimeToLive(qctx, lease)
			qcancel()
			if err == nil && resp.TTL == -1 {
				return map[string]string{"expired": "true", "expired_after": time.Since(cutAt).Round(time.Millisecond).String()}
			}
			if !sleepUntil(hctx, time.Now().Add(20*time.Millisecond)) {
				return map[string]string{"expired": "false"}
			}
		}
	}
	return nil
}

// leaseRevoke revokes the holder's session lease with an admin client.
func (r *runner) leaseRevoke(ctx context.Context, e Entry, a *active) error {
	name, lease, admin, err := r.holderLease(ctx, e, a)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := admin.Revoke(rctx, lease); err != nil {
		return fmt.Errorf("revoking lease %x of %s: %w", lease, name, err)
	}
	return nil
}

func (r *runner) clock(ctx context.Context, e Entry, a *active) error {
	name, err := r.targetClient(ctx, e, a)
	if err != nil {
		return err
	}
	reset := func(context.Context) error { r.cl.ResetClock(name); return nil }
	switch e.Fault {
	case ClockBump:
		d, err := time.ParseDuration(e.Params["delta"])
		if err != nil {
			return err
		}
		a.stop = reset
		r.cl.BumpClock(name, d)
	case ClockRate:
		rate, err := strconv.ParseFloat(e.Params["rate"], 64)
		if err != nil {
			return err
		}
		// The drift stops, but the time the clock lost stays lost until the
		// final heal steps it back: a stepped clock would end the holder's
		// critical section early, which no drifting clock does.
		a.stop = func(context.Context) error { r.cl.SetClockRate(name, 1); return nil }
		r.cl.SetClockRate(name, rate)
	case ClockStrobe:
		d, err := time.ParseDuration(e.Params["delta"])
		if err != nil {
			return err
		}
		period, err := time.ParseDuration(e.Params["period"])
		if err != nil {
			return err
		}
		if period <= 0 {
			return fmt.Errorf("strobe period %v", period)
		}
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			t := time.NewTicker(period)
			defer t.Stop()
			sign := time.Duration(1)
			for {
				r.cl.BumpClock(name, sign*d)
				sign = -sign
				select {
				case <-done:
					return
				case <-t.C:
				}
			}
		})
		a.stop = func(ctx context.Context) error {
			close(done)
			wg.Wait()
			return reset(ctx)
		}
	}
	return nil
}

func (r *runner) pauseClient(ctx context.Context, e Entry, a *active) error {
	name, err := r.targetClient(ctx, e, a)
	if err != nil {
		return err
	}
	bw := e.Params["before_write"] == "true"
	return r.cl.Pause(name, e.Duration, bw)
}

func (r *runner) pauseMember(ctx context.Context, e Entry, a *active) error {
	i, err := r.member(ctx, e, a.params)
	if err != nil {
		return err
	}
	a.targets = []string{r.c.Members()[i].Name}
	a.stop = func(context.Context) error { return r.c.ResumeMember(i) }
	return r.c.PauseMember(i)
}

func (r *runner) crashMember(ctx context.Context, e Entry, a *active) error {
	i, err := r.member(ctx, e, a.params)
	if err != nil {
		return err
	}
	a.targets = []string{r.c.Members()[i].Name}
	a.stop = func(ctx context.Context) error {
		began := time.Now()
		err := r.c.RestartMember(ctx, i)
		a.params["restart_took"] = time.Since(began).Round(time.Millisecond).String()
		return err
	}
	return r.c.HardStopMember(i)
}

func (r *runner) crashClient(ctx context.Context, e Entry, a *active) error {
	name, err := r.targetClient(ctx, e, a)
	if err != nil {
		return err
	}
	return r.cl.Crash(name)
}

// slow puts a latency (with jitter), bandwidth or reset toxic on a client's
// etcd links, its resource link, or both.
func (r *runner) slow(ctx context.Context, e Entry, a *active) error {
	name, err := r.targetClient(ctx, e, a)
	if err != nil {
		return err
	}
	var links []*toxiclient.Proxy
	if l := e.Params["link"]; l == "etcd" || l == "all" {
		ps, err := r.c.Links(name)
		if err != nil {
			return err
		}
		links = append(links, ps...)
	}
	if l := e.Params["link"]; l == "resource" || l == "all" {
		p, err := r.c.Toxiproxy().Proxy(name + "-resource")
		if err != nil {
			return fmt.Errorf("resource link of %s: %w", name, err)
		}
		links = append(links, p)
	}
	if len(links) == 0 {
		return fmt.Errorf("no links for link=%q", e.Params["link"])
	}
	ms := func(k string) int {
		d, _ := time.ParseDuration(e.Params[k])
		return int(d / time.Millisecond)
	}
	var ts toxics
	a.stop = func(context.Context) error { return ts.remove() }
	for _, p := range links {
		var err error
		switch e.Params["toxic"] {
		case "latency":
			// Upstream: requests (a write to the resource) arrive late.
			err = ts.add(p, "slow", "latency", toxiclient.Attributes{"latency": ms("latency"), "jitter": ms("jitter")}, "upstream")
		case "bandwidth":
			kb, _ := strconv.Atoi(e.Params["rate_kb"])
			err = ts.add(p, "slow", "bandwidth", toxiclient.Attributes{"rate": kb}, "upstream", "downstream")
		case "reset":
			err = ts.add(p, "slow", "reset_peer", toxiclient.Attributes{"timeout": ms("after")}, "upstream")
		default:
			err = fmt.Errorf("unknown slow toxic %q", e.Params["toxic"])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// formatParams renders params as " k=v k=v", sorted, for log lines.
func formatParams(p map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(p)) {
		fmt.Fprintf(&b, " %s=%s", k, p[k])
	}
	return b.String()
}
