package nemesis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/system"
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
	// Cells are the (lock state × fault family) cells the faults struck.
	Cells []Cell `json:"cells"`
}

// Run carries out sched against the system under test and the workload's
// clients, one fault at a time, each at its entry's At (measured from the
// call) or as soon as the previous one stopped, until the schedule is done
// and ctx ends. A fault in force when ctx ends is stopped at once. Then
// every family heals what its faults may have left behind (partitions
// mended, members resumed and restarted, toxics removed, clocks reset,
// client pauses waited out), and a leader is agreed on.
//
// Each fault's start and stop is recorded through rec as an "info"
// operation of process "nemesis", f "start"/"stop", value {fault, targets,
// params} with the targets as resolved; the final heal is f "heal" with
// fault "all". A fault that fails to start is recorded as start and stop
// with the error; one that was still waiting for its target when ctx ended
// did nothing and is not recorded. Run returns an error only for an unusable schedule or a
// failed heal.
func Run(ctx context.Context, cfg Config, sys system.System, cl Clients, rec Recorder, sched Schedule) (Report, error) {
	cfg = cfg.WithDefaults()
	r := &runner{cfg: cfg, env: &Env{Sys: sys, Clients: cl, TTL: cfg.TTL, OpTimeout: cfg.OpTimeout}, rec: rec, start: time.Now(), rep: Report{Faults: []Fired{}}}
	if err := sched.Validate(); err != nil {
		return r.rep, err
	}
	if n := len(sys.MemberNames()); sched.Members != n {
		return r.rep, fmt.Errorf("nemesis: schedule is for %d members, the system has %d", sched.Members, n)
	}
	if err := RefuseSchedule(sys, sched); err != nil {
		return r.rep, err
	}
	for i, e := range sched.Entries {
		if !sleepUntil(ctx, r.start.Add(e.At)) {
			break
		}
		r.fire(ctx, i, e)
	}
	<-ctx.Done()
	err := r.heal()
	r.rep.Cells = CellsOf(r.rep.Faults)
	return r.rep, err
}

type runner struct {
	cfg   Config
	env   *Env
	rec   Recorder
	start time.Time
	rep   Report
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
	a := &Injected{Params: map[string]string{}}
	var err error
	if f, ok := familyOf(e.Fault); ok {
		r.env.aimBy = time.Time{}
		if r.cfg.Time > 0 {
			r.env.aimBy = r.start.Add(r.cfg.Time - e.Duration)
		}
		var inj *Injected
		if inj, err = f.Inject(ctx, r.env, e); inj != nil {
			a = inj
		}
	} else {
		err = fmt.Errorf("unknown fault %q", e.Fault)
	}
	if errors.Is(err, errNotStruck) {
		return
	}
	// A fault that waited for its moment (a fresh grant, a slow section)
	// started when it struck.
	fired.Start = r.since()
	params := maps.Clone(e.Params)
	if params == nil {
		params = map[string]string{}
	}
	if e.Duration > 0 {
		params["duration"] = e.Duration.String()
	}
	// A fault played as another kind may say its own duration.
	maps.Copy(params, a.Params)
	kind := e.Fault
	if a.Kind != "" && a.Kind != e.Fault {
		// Played as another kind: recorded as what was done.
		kind, params["scheduled"] = a.Kind, e.Fault
		fired.Fault = kind
	}
	if a.Targets == nil {
		a.Targets = []string{}
	}
	fired.Targets, fired.Params = a.Targets, params
	r.record(histories.FStart, kind, a.Targets, params, err)
	if err != nil {
		fired.Error = err.Error()
		r.cfg.logf("nemesis: %s: %v", kind, err)
	} else {
		r.cfg.logf("nemesis %6.2fs: %s %s%s", fired.Start.Seconds(), kind, strings.Join(a.Targets, ","), formatParams(params))
		if a.Hold != nil {
			extra := a.Hold(ctx, e.Duration)
			params = maps.Clone(params)
			maps.Copy(params, extra)
			fired.Params = params
		} else {
			sleepUntil(ctx, time.Now().Add(e.Duration))
		}
	}
	if a.Stop != nil {
		sctx, cancel := context.WithTimeout(context.Background(), r.cfg.HealTimeout)
		serr := a.Stop(sctx)
		cancel()
		if serr != nil {
			r.cfg.logf("nemesis: stopping %s: %v", kind, serr)
			err = errors.Join(err, serr)
			fired.Error = err.Error()
		}
	}
	if len(a.Params) > 0 { // Stop may have noted more
		params = maps.Clone(params)
		maps.Copy(params, a.Params)
		fired.Params = params
	}
	fired.Stop = r.since()
	r.env.calm = time.Now()
	r.record(histories.FStop, kind, a.Targets, params, err)
	r.rep.Faults = append(r.rep.Faults, fired)
}

// heal has every family undo what its faults may have left behind, then
// waits for a leader.
func (r *runner) heal() error {
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.HealTimeout)
	defer cancel()
	var (
		errs   []error
		healed []string
	)
	// Toxics on client links are one mechanism shared by several
	// families: removed once, here.
	if links, ok := r.env.Sys.(linker); ok {
		if err := links.ClearToxics(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, f := range families {
		hf, ok := f.(healer)
		if !ok {
			continue
		}
		h, err := hf.Heal(ctx, r.env)
		healed = append(healed, h...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if l, ok := r.env.Sys.(system.Leaderer); ok {
		if _, err := l.Leader(ctx); err != nil {
			errs = append(errs, err)
		}
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

// formatParams renders params as " k=v k=v", sorted, for log lines.
func formatParams(p map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(p)) {
		fmt.Fprintf(&b, " %s=%s", k, p[k])
	}
	return b.String()
}
