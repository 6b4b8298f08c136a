package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/locktest/locktest/cluster"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/resource"
	"github.com/locktest/locktest/workload"
)

// RunConfig is the configuration of a run, as stored in results.json.
type RunConfig struct {
	Members       int           `json:"members"`
	Clients       int           `json:"clients"`
	Locks         []string      `json:"locks"`
	Time          time.Duration `json:"time_ns"`
	Resource      resource.Mode `json:"resource"`
	TTL           int           `json:"ttl_s"`
	ThinkMin      time.Duration `json:"think_min_ns"`
	ThinkMax      time.Duration `json:"think_max_ns"`
	OpTimeout     time.Duration `json:"op_timeout_ns"`
	CheckTimeout  time.Duration `json:"check_timeout_ns"`
	TickMs        uint          `json:"tick_ms"`
	ElectionMs    uint          `json:"election_ms"`
	RunDirectory  string        `json:"run_directory"`
	CommandLine   []string      `json:"command_line"`
	StartedAtUnix int64         `json:"started_at_unix"`
}

// RunStats are the figures of the run itself.
type RunStats struct {
	ClusterStart  time.Duration  `json:"cluster_start_ns"`
	ClusterClose  time.Duration  `json:"cluster_close_ns"`
	Leader        string         `json:"leader"`
	Workload      time.Duration  `json:"workload_ns"`
	OpsPerSecond  float64        `json:"ops_per_second"`
	AcquirePerSec float64        `json:"acquisitions_per_second"`
	Stats         workload.Stats `json:"stats"`
}

func runCmd(args []string, stdout io.Writer) (int, error) {
	def := workload.DefaultConfig()
	fs := newFlags("run", "run [flags]\n\nStarts a 3-member etcd cluster behind toxiproxy, lets clients contend for locks and\nwrite to a protected resource, records every operation and checks the history.", stdout)
	clients := fs.Int("clients", def.Clients, "number of contending clients")
	locks := fs.Int("locks", len(def.Locks), "number of distinct locks the clients contend for")
	runTime := fs.Duration("time", 10*time.Second, "how long clients contend before the run winds down")
	seed := fs.Int64("seed", 0, "seed for every random choice (default: drawn from the clock, and printed)")
	out := fs.String("out", "runs", "directory under which the run directory is created")
	mode := fs.String("resource", string(resource.Fenced), "protected resource: fenced (rejects stale tokens) or unfenced")
	require := fs.String("require", "resource", "checks whose failure makes the exit status 1: a comma list of mutex, resource, or all")
	ttl := fs.Int("ttl", def.TTL, "session lease TTL in seconds")
	thinkMax := fs.Duration("think", def.ThinkMax, "longest think time between a holder's read and write (drawn uniformly from 0)")
	opTimeout := fs.Duration("op-timeout", def.OpTimeout, "time limit of each acquire, read, write and release")
	checkTimeout := fs.Duration("check-timeout", time.Minute, "time limit for each check; a check that hits it is unknown")
	if err := parseFlags(fs, args); err != nil {
		return exitUnknown, err
	}
	if fs.NArg() > 0 {
		return exitUnknown, fmt.Errorf("run: unexpected argument %q (see locktest run --help)", fs.Arg(0))
	}
	seedSet := false
	fs.Visit(func(f *flag.Flag) { seedSet = seedSet || f.Name == "seed" })
	if !seedSet {
		*seed = time.Now().UnixNano() % 1_000_000
	}

	cfg := def
	cfg.Clients, cfg.TTL, cfg.ThinkMax, cfg.OpTimeout, cfg.Seed = *clients, *ttl, *thinkMax, *opTimeout, *seed
	if *locks < 1 {
		return exitUnknown, fmt.Errorf("--locks must be at least 1, got %d", *locks)
	}
	cfg.Locks = lockNames(*locks)
	if err := cfg.Validate(); err != nil {
		return exitUnknown, fmt.Errorf("run: %w", err)
	}
	if *runTime <= 0 {
		return exitUnknown, fmt.Errorf("--time must be positive, got %v", *runTime)
	}
	if *checkTimeout <= 0 {
		return exitUnknown, fmt.Errorf("--check-timeout must be positive, got %v", *checkTimeout)
	}
	resMode, err := resource.ParseMode(*mode)
	if err != nil {
		return exitUnknown, fmt.Errorf("--resource: %w", err)
	}
	required, err := parseRequire(*require)
	if err != nil {
		return exitUnknown, err
	}
	dir, err := newRunDir(*out, *seed)
	if err != nil {
		return exitUnknown, err
	}

	rc := &RunConfig{
		Members: 3, Clients: cfg.Clients, Locks: cfg.Locks, Time: *runTime, Resource: resMode,
		TTL: cfg.TTL, ThinkMin: cfg.ThinkMin, ThinkMax: cfg.ThinkMax, OpTimeout: cfg.OpTimeout,
		CheckTimeout: *checkTimeout, TickMs: 10, ElectionMs: 100,
		RunDirectory: dir, CommandLine: os.Args, StartedAtUnix: time.Now().Unix(),
	}
	fmt.Fprintf(stdout, "locktest run: seed %d, %d clients, %d lock(s), resource %s, %s (run directory %s)\n",
		*seed, cfg.Clients, len(cfg.Locks), resMode, *runTime, relPath(dir))

	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	stats, runErr := execute(ctx, rc, cfg, dir, stdout)
	interrupted := ctx.Err() != nil
	if runErr != nil && !interrupted {
		return exitUnknown, runErr
	}

	history := filepath.Join(dir, "history.jsonl")
	res, err := check(history, dir, *checkTimeout, required)
	if err != nil {
		return exitUnknown, fmt.Errorf("checking %s: %w", relPath(history), err)
	}
	res.Seed, res.Config, res.Run, res.Interrupted = seed, rc, stats, interrupted
	if interrupted && res.Exit == exitValid {
		res.Verdict, res.Exit = "unknown", exitUnknown
	}
	if err := writeResults(filepath.Join(dir, "results.json"), res); err != nil {
		return exitUnknown, fmt.Errorf("writing results: %w", err)
	}
	printSummary(stdout, res)
	return res.Exit, nil
}

func lockNames(n int) []string {
	if n == 1 {
		return []string{"lock"}
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("lock-%d", i)
	}
	return names
}

// newRunDir creates a fresh directory for one run under out.
func newRunDir(out string, seed int64) (string, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", fmt.Errorf("--out: %w", err)
	}
	base := filepath.Join(out, fmt.Sprintf("%s-seed%d", time.Now().Format("20060102-150405"), seed))
	dir := base
	for i := 1; ; i++ {
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			return filepath.Abs(dir)
		}
		if !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("--out: %w", err)
		}
		dir = fmt.Sprintf("%s.%d", base, i)
	}
}

// execute runs the cluster, the resource and the workload, recording into the
// run directory. Everything it starts is stopped before it returns.
func execute(ctx context.Context, rc *RunConfig, cfg workload.Config, dir string, stdout io.Writer) (*RunStats, error) {
	w, err := histories.Create(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return nil, err
	}
	defer w.Close()

	st := &RunStats{}
	began := time.Now()
	cl, err := cluster.Start(ctx, cluster.Config{Members: rc.Members, LogDir: filepath.Join(dir, "logs"), TickMs: rc.TickMs, ElectionMs: rc.ElectionMs})
	if err != nil {
		return nil, fmt.Errorf("starting the cluster: %w", err)
	}
	st.ClusterStart = time.Since(began)
	defer func() {
		closing := time.Now()
		cl.Close()
		st.ClusterClose = time.Since(closing)
	}()
	if m, err := cl.Leader(ctx); err == nil {
		st.Leader = m.Name
	}
	fmt.Fprintf(stdout, "cluster: %d members ready in %s, leader %s; logs in %s\n",
		rc.Members, st.ClusterStart.Round(time.Millisecond), st.Leader, relPath(filepath.Join(dir, "logs")))

	res, err := resource.Start(rc.Resource)
	if err != nil {
		return nil, err
	}
	defer func() {
		res.Close()
		writeResourceLog(filepath.Join(dir, "resource-log.jsonl"), res.Log())
	}()

	rec := histories.NewRecorder(w, time.Now())
	stop := make(chan struct{})
	timer := time.AfterFunc(rc.Time, func() { close(stop) })
	defer timer.Stop()
	workStart := time.Now()
	wl, err := workload.New(ctx, cfg, cl, res.Addr(), rec)
	if err != nil {
		return nil, err
	}
	defer wl.Close()
	stats, err := wl.Run(ctx, stop)
	st.Workload = time.Since(workStart)
	st.Stats = stats
	if secs := st.Workload.Seconds(); secs > 0 {
		st.OpsPerSecond = float64(stats.Operations) / secs
		st.AcquirePerSec = float64(stats.Acquisitions) / secs
	}
	return st, err
}

// writeResourceLog stores the writes the resource accepted, in its order.
func writeResourceLog(path string, log []resource.Entry) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, e := range log {
		enc.Encode(e)
	}
}

func printSummary(w io.Writer, r *Results) {
	if r.Interrupted {
		fmt.Fprintln(w, "interrupted: the history recorded so far was kept and checked")
	}
	if s := r.Run; s != nil {
		fmt.Fprintf(w, "workload: %s, %d operations (%.0f/s), %d acquisitions (%.1f/s), acquire p50 %s p99 %s, %d unknown outcomes\n",
			s.Workload.Round(10*time.Millisecond), s.Stats.Operations, s.OpsPerSecond, s.Stats.Acquisitions, s.AcquirePerSec,
			s.Stats.AcquireP50.Round(100*time.Microsecond), s.Stats.AcquireP99.Round(100*time.Microsecond), s.Stats.Unknown)
		fmt.Fprintf(w, "cluster closed in %s\n", s.ClusterClose.Round(time.Millisecond))
	}
	fmt.Fprintln(w, "checks:")
	printChecks(w, r)
	if r.Config != nil {
		fmt.Fprintf(w, "files: %s/ (history.jsonl, results.json, mutex.html, resource.html, resource-log.jsonl, logs/)\n", relPath(r.Config.RunDirectory))
	}
}
