// Package harness runs locktest end to end: the system under test of the
// recipe's backend (real servers behind toxiproxy: see backend/), the
// contending clients and their protected resource, the nemesis' faults on a
// seeded schedule, and the checks of the recorded history. The CLI is a thin
// layer over it, and a team can call Run from its own tests.
package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/resource"
	"github.com/locktest/locktest/scenario"
	"github.com/locktest/locktest/system"
	"github.com/locktest/locktest/workload"
)

// Exit statuses, as in Jepsen.
const (
	ExitValid   = 0
	ExitInvalid = 1
	ExitUnknown = 2
)

// Options describe one run.
type Options struct {
	// Dir is the run directory; it must exist. NewRunDir makes one.
	Dir string `json:"dir"`
	// Backends are those the run may be on: registry.Backends() (package
	// backend/registry), every backend locktest has, or a set of one's
	// own. Required: the harness imports no backend, so that what
	// imports it (shrink, report, a team's test) links only the servers
	// it is given.
	Backends *backend.Set `json:"-"`
	// System are the options of the recipe's backend: which of its
	// systems the run starts, and how (for etcd, an *etcd.Options of
	// package backend/etcd: embedded members, member processes or a
	// running cluster). Nil: its defaults.
	System backend.Options `json:"system"`
	// Backend names the backend the run is on: the one of System if set,
	// else this (a recipe that is not a built-in, a team's own or a lock
	// in another process, runs on any backend), else the recipe's (the
	// default backend for one that is not a built-in). The plan has it.
	Backend string `json:"backend"`
	// Members is the system's size, where its backend lets it be chosen:
	// 3 (default) or 5. The plan has the size its backend starts.
	Members int `json:"members"`
	// Workload configures the clients; its Seed is the run's seed, its
	// Recipe the lock under test (nil: the default backend's first).
	Workload workload.Config `json:"workload"`
	// RecipeName is the plan's, from Workload.Recipe, for the record.
	RecipeName string `json:"recipe"`
	// Resource is the protected resource's mode (default fenced): the
	// HTTP store's, or one the backend keeps in its system (etcd's
	// etcd-txn: the values in etcd, written by Txns guarded by the lock).
	Resource resource.Mode `json:"resource"`
	// Time is how long the clients contend, under faults if any.
	Time time.Duration `json:"time_ns"`
	// Nemesis configures the faults; no Faults means none. The plan has
	// them resolved (--nemesis all: the families the system offers); the
	// run's facts (members, clients, TTL, time) complete it as it starts.
	Nemesis nemesis.Config `json:"nemesis"`
	// DefaultFaults says that Nemesis.Faults are a plain run's defaults,
	// not the user's choice: a family the backend does not offer is left
	// out (the lease faults on a backend without leases), not refused.
	DefaultFaults bool `json:"default_faults,omitempty"`
	// Schedule replays a stored schedule instead of drawing one.
	Schedule *nemesis.Schedule `json:"-"`
	// FitSchedule says that Schedule was drawn for another system (one
	// schedule for runs on several backends, as compare has): the faults
	// this system cannot carry out are dropped (RunStats.Dropped), and a
	// fault on member mI strikes this system's member I modulo its size.
	FitSchedule bool `json:"fit_schedule,omitempty"`
	// Quiet is how long the clients go on after the final heal (default DefaultQuiet
	// when there are faults): the window in which liveness is judged.
	Quiet time.Duration `json:"quiet_ns"`
	// StopOnViolation ends the fault phase as soon as the resource accepts a
	// stale write, for sweeps that look for the first violation.
	StopOnViolation bool `json:"stop_on_violation,omitempty"`
	// Required are the checks whose failure decides the verdict (default
	// RequireData).
	Required []string `json:"required"`
	// CheckTimeout limits each check (default 1 min).
	CheckTimeout time.Duration `json:"check_timeout_ns"`
	// LivenessBound is how soon after the final heal every client asking
	// for a lock must get it (default DefaultLivenessBound).
	LivenessBound time.Duration `json:"liveness_bound_ns"`
	// Scenario is the catalog scenario the run plays, if any.
	Scenario *Scenario `json:"scenario,omitempty"`
	// Shrunk says, for a replay of a shrunk schedule, what it was shrunk
	// from.
	Shrunk *Shrunk `json:"shrunk,omitempty"`
	// Log, if set, receives a line as each phase starts and each fault fires.
	Log io.Writer `json:"-"`

	play *scenario.Scenario // the scenario staged (Stage), completed when planned
}

// RunStats are the figures of the run itself.
type RunStats struct {
	// System says what was under test ("etcd 3.6.16, 3 embedded members").
	System string `json:"system"`
	// Version is the version of its servers ("3.6.16"), as its backend
	// reads it.
	Version       string         `json:"version,omitempty"`
	ClusterStart  time.Duration  `json:"cluster_start_ns"`
	ClusterClose  time.Duration  `json:"cluster_close_ns"`
	Leader        string         `json:"leader"`
	Workload      time.Duration  `json:"workload_ns"`
	OpsPerSecond  float64        `json:"ops_per_second"`
	AcquirePerSec float64        `json:"acquisitions_per_second"`
	Stats         workload.Stats `json:"stats"`
	// Schedule is the file holding the fault schedule, if there were faults.
	Schedule string          `json:"schedule,omitempty"`
	Nemesis  *nemesis.Report `json:"nemesis,omitempty"`
	// CPU is the process's CPU time (user and system) while the clients
	// ran: the clients and toxiproxy, and embedded etcd members, which
	// share the process.
	CPU time.Duration `json:"cpu_ns"`
	// ServerCPU is the CPU time of the servers' own processes
	// (system.Processes: member processes, Redis servers) while the
	// clients ran, which CPU does not include; absent when the servers
	// have none (embedded members, an external cluster).
	ServerCPU *time.Duration `json:"server_cpu_ns,omitempty"`
	// Dropped are the faults of a fitted schedule (Options.FitSchedule)
	// that this system cannot carry out, left out of its run.
	Dropped []nemesis.Entry `json:"dropped_faults,omitempty"`
	// FirstViolation is when, after the clients started, the resource first
	// accepted a stale write (0: never).
	FirstViolation time.Duration `json:"first_violation_ns,omitempty"`
}

// Run plans a run of o (NewPlan) and carries it out (Plan.Run).
func Run(ctx context.Context, o Options) (*Results, error) {
	p, err := NewPlan(o)
	if err != nil {
		return nil, err
	}
	return p.Run(ctx)
}

// Run carries out the planned run in p.Dir and checks it. Everything it
// starts is stopped before it returns. Cancelling ctx interrupts the run:
// the history recorded so far is kept and checked, and the results say so.
// A run that fails part way (a heal that failed, a history write that
// failed) is checked too, with the error in its results: exit 1 if a
// required check found a violation, else 2. The error is for a run that
// could not be carried out at all: no Dir, or no history to check. p is
// not changed; the results record it (Results.Config, Results.Command).
func (p *Plan) Run(ctx context.Context) (*Results, error) {
	if p.Dir == "" {
		return nil, errors.New("harness: Options.Dir is required")
	}
	p.sweepBeside()
	history := filepath.Join(p.Dir, historyName)
	st, runErr := execute(ctx, p, history)
	interrupted := ctx.Err() != nil
	if _, err := os.Stat(history); runErr != nil && err != nil {
		return nil, runErr
	}
	co := CheckOptions{Backends: p.Backends, VisualizationDir: p.Dir, Timeout: p.CheckTimeout, Required: p.Required, LivenessBound: p.LivenessBound, planned: p.facts}
	if st != nil {
		co.Hashes = st.hashes
	}
	res, err := Check(history, co)
	if err != nil {
		return nil, fmt.Errorf("checking %s: %w", history, err)
	}
	// The config recorded is the plan as run: its workload's run
	// directory, and its lock keys where the system put them.
	config := p.Options
	config.Workload.Dir = p.Dir
	if st != nil && st.prefix != "" {
		config.Workload.Prefix = st.prefix
	}
	seed := p.Workload.Seed
	res.Seed, res.Config, res.Interrupted, res.Shrunk = &seed, &config, interrupted, p.Shrunk
	if p.reproducible {
		res.Args, res.Command = reproduce(p.Options, p.builtin, p.system.Args)
	}
	if w := p.boundUnderTTL(); w != "" {
		res.Warnings = append(res.Warnings, w)
	}
	if st != nil {
		res.Run = &st.RunStats
		for i, c := range res.Checks {
			if c.Name == histories.CheckConsistency && st.noHashes != "" {
				res.Checks[i].Explanation = st.noHashes
			}
		}
	}
	var faults []nemesis.Fired
	if st != nil && st.Nemesis != nil {
		faults = st.Nemesis.Faults
	}
	if p.Scenario != nil && st != nil {
		faults = append(slices.Clone(faults), unstruck(p.schedule, faults)...)
	}
	res.Scenario = p.Scenario.judge(res.Checks, faults)
	if runErr != nil && !interrupted {
		res.Error = runErr.Error()
	}
	if (interrupted || res.Error != "") && res.Exit == ExitValid {
		res.Verdict, res.Exit = checker.Unknown, ExitUnknown
	}
	if err := res.WriteFile(filepath.Join(p.Dir, "results.json")); err != nil {
		return nil, fmt.Errorf("writing results: %w", err)
	}
	return res, nil
}

// runStats adds what is collected for the checks but not reported as such.
type runStats struct {
	RunStats
	hashes []checker.MemberHash
	// noHashes says why a system without a consistency read
	// (system.Hasher) left consistency unjudged.
	noHashes string
	// prefix is where the system put the lock keys, if it decides that.
	prefix string
}

func (o *Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

// execute runs the cluster, the resource, the workload and the nemesis,
// recording into history.
func execute(ctx context.Context, p *Plan, history string) (*runStats, error) {
	o := &p.Options
	st := &runStats{}
	began := time.Now()
	logs := filepath.Join(o.Dir, logsDir)
	sut, err := p.system.Start(ctx, o.Dir, logs, o.logf)
	if err != nil {
		return nil, err
	}
	st.prefix = sut.Prefix
	cl := sut.System
	st.ClusterStart = time.Since(began)
	st.System, st.Version = cl.Describe(), sut.Version
	defer func() {
		closing := time.Now()
		sut.Close()
		st.ClusterClose = time.Since(closing)
	}()
	members := cl.MemberNames()
	if err := p.agrees(members); err != nil {
		return nil, err
	}
	if l, ok := cl.(system.Leaderer); ok {
		if i, err := l.Leader(ctx); err == nil {
			st.Leader = members[i]
		}
	}
	if !system.Has(cl, system.CapHash) {
		st.noHashes = fmt.Sprintf("%s offers no consistency read (no state its servers should share), so nothing was compared.", st.System)
	}
	leader := ""
	if st.Leader != "" {
		leader = ", leader " + st.Leader
	}
	o.logf("cluster: %s ready in %s%s; logs in %s", st.System, st.ClusterStart.Round(time.Millisecond), leader, logs)
	sched := p.schedule
	st.Dropped = p.dropped
	w, err := histories.Create(history)
	if err != nil {
		return nil, err
	}
	defer w.Close()

	// The HTTP resource; with a resource the backend keeps (etcd-txn) the
	// values live in its system instead, and a stale write is one its
	// guard refused.
	var (
		res     *resource.Server
		resAddr string
		stale   <-chan struct{} // stays nil, never ready, with a kept resource
	)
	if p.httpResource {
		// The resource logs each write it accepts as it accepts it, so
		// that a killed run's log settles the writes it cut off too.
		resLog, err := os.Create(filepath.Join(o.Dir, resourceLogName))
		if err != nil {
			return nil, err
		}
		defer resLog.Close()
		if res, err = resource.StartLogged(o.Resource, resLog); err != nil {
			return nil, err
		}
		resAddr, stale = res.Addr(), res.Stale()
		defer res.Close()
	}

	rec := histories.NewRecorder(w, time.Now())
	wcfg := o.Workload
	wcfg.Dir, wcfg.Logf = o.Dir, o.logf
	if sut.Prefix != "" {
		wcfg.Prefix = sut.Prefix
	}
	wl, err := workload.New(ctx, wcfg, sut.Workload, resAddr, rec)
	if err != nil {
		// Nothing was recorded: the run could not start its clients, and
		// leaves no history to check.
		w.Close()
		os.Remove(history)
		return nil, err
	}
	defer wl.Close()

	if sched != nil {
		st.Schedule = filepath.Join(o.Dir, "schedule.json")
		if err := sched.WriteFile(st.Schedule); err != nil {
			return nil, err
		}
	}

	// The fault phase ends after Time, or at the first stale write when
	// asked; the nemesis then heals everything and the clients go on for the
	// quiet period.
	workStart := time.Now()
	faultCtx, endFaults := context.WithTimeout(ctx, o.Time)
	defer endFaults()
	if o.StopOnViolation {
		go func() {
			select {
			case <-stale:
				endFaults()
			case <-faultCtx.Done():
			}
		}()
	}
	stop := make(chan struct{})
	workDone := make(chan struct{}) // the clients stopped early, on an error
	nemesisDone := make(chan error, 1)
	go func() {
		var err error
		if sched != nil {
			var rep nemesis.Report
			cfg := p.faults
			if o.Log != nil && cfg.Logf == nil {
				cfg.Logf = o.logf
			}
			rep, err = nemesis.Run(faultCtx, cfg, cl, wl, rec, *sched)
			st.Nemesis = &rep
		} else {
			<-faultCtx.Done()
		}
		quiet := o.Quiet
		if sched == nil || (o.StopOnViolation && isClosed(stale)) {
			quiet = 0
		}
		select {
		case <-time.After(quiet):
		case <-ctx.Done():
		case <-workDone:
		}
		close(stop)
		nemesisDone <- err
	}()

	cpu, servers := cpuTime(), serverCPU(cl)
	stats, err := wl.Run(ctx, stop)
	endFaults()
	close(workDone)
	nemErr := <-nemesisDone
	st.CPU, st.ServerCPU = cpuTime()-cpu, servers()
	st.Workload = time.Since(workStart)
	st.Stats = stats
	if secs := st.Workload.Seconds(); secs > 0 {
		st.OpsPerSecond = float64(stats.Operations) / secs
		st.AcquirePerSec = float64(stats.Acquisitions) / secs
	}
	if res != nil {
		for _, e := range res.Log() {
			if e.Stale {
				st.FirstViolation = e.At.Sub(workStart)
				break
			}
		}
	}
	if ctx.Err() == nil {
		st.hashes = memberHashes(ctx, cl)
	}
	return st, errors.Join(err, nemErr)
}

// boundUnderTTL warns when a claim can outlive the final heal as long as
// the liveness bound allows: a holder a fault crashed or paused just before
// the heal keeps its claim for up to its TTL, and a waiter then waits that
// long with no bug in the lock.
func (o *Options) boundUnderTTL() string {
	ttl := time.Duration(o.Workload.TTL) * time.Second
	if len(o.Nemesis.Faults) == 0 || ttl < o.LivenessBound {
		return ""
	}
	return fmt.Sprintf("--liveness-bound %v is no longer than the TTL (%v), which a claim can outlive the final heal by (its holder crashed or paused then): a liveness violation may be the TTL's, not the lock's; set --liveness-bound above the TTL",
		o.LivenessBound, ttl)
}
