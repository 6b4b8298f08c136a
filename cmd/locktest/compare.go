package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/internal/words"
	"github.com/locktest/locktest/nemesis"
)

// compareRow is one configuration's line of the compare table.
type compareRow struct {
	Recipe   string `json:"recipe"`
	Backend  string `json:"backend"`
	System   string `json:"system"`
	Resource string `json:"resource"`
	Clients  int    `json:"clients"`
	Dir      string `json:"dir"`
	// Faults counts the schedule's faults this run carried out; Dropped
	// are those its backend cannot, left out of its run.
	Faults       int                        `json:"faults"`
	Dropped      []string                   `json:"dropped_faults,omitempty"`
	Verdicts     map[string]checker.Verdict `json:"verdicts"`
	Violations   int                        `json:"violations"`
	Overlaps     int                        `json:"mutex_overlaps"`
	Acquisitions int                        `json:"acquisitions"`
	PerSecond    float64                    `json:"acquisitions_per_second"`
	P50          time.Duration              `json:"acquire_p50_ns"`
	P70          time.Duration              `json:"acquire_p70_ns"`
	P90          time.Duration              `json:"acquire_p90_ns"`
	P99          time.Duration              `json:"acquire_p99_ns"`
	// CPUPerAcq is locktest's own CPU per acquisition (clients,
	// toxiproxy, embedded members); ServerCPUPerAcq the servers' own
	// processes', absent when they have none.
	CPUPerAcq       time.Duration  `json:"cpu_per_acquisition_ns"`
	ServerCPUPerAcq *time.Duration `json:"server_cpu_per_acquisition_ns,omitempty"`
	Exit            int            `json:"exit"`
}

func compareCmd(bs *backend.Set, args []string, stdout io.Writer) (int, error) {
	fs := newFlags("compare", "compare [flags]\n\nRuns several lock recipes, of any backends, resource modes and client counts under one\nseeded fault schedule, one after another on fresh systems, and prints one table. A fault a\nbackend cannot carry out is dropped from its runs, and the table says so; a fault on a\nmember strikes any backend's server alike. A backend's flags apply to its own recipes.\n--recipe (or --recipes), --resource, --clients and --backend take comma lists here (a recipe that is not a\nbuilt-in, exec:..., runs on each backend of --backend; its command cannot hold a comma); every other flag is run's.", stdout)
	rf := addRunFlags(fs, bs)
	rf.lenient = true
	fs.Var(stringFlag{rf.recipe}, "recipes", "same as --recipe")
	if err := parseFlags(fs, args); err != nil {
		return exitUnknown, err
	}
	if fs.NArg() > 0 {
		return exitUnknown, fmt.Errorf("compare: unexpected argument %q (see locktest compare --help)", fs.Arg(0))
	}
	recipes, modes, clients, backends := splitList(*rf.recipe), splitList(*rf.mode), splitList(*rf.clients), splitList(*rf.backend)
	if len(backends) == 0 {
		backends = []string{""}
	}
	type config struct{ recipe, backend, mode, clients string }
	var configs []config
	for _, c := range clients {
		for _, r := range recipes {
			on := backends
			if _, _, builtin := bs.Builtin(r); builtin {
				on = []string{""} // a built-in runs on its own
			}
			for _, b := range on {
				for _, m := range modes {
					configs = append(configs, config{r, b, m, c})
				}
			}
		}
	}
	// Check every combination before starting any run.
	var (
		opts   []*harness.Plan
		faults []string // of the one schedule
	)
	for _, c := range configs {
		*rf.recipe, *rf.backend, *rf.mode, *rf.clients = c.recipe, c.backend, c.mode, c.clients
		o, err := rf.options()
		if err != nil {
			return exitUnknown, fmt.Errorf("compare: %w", err)
		}
		// One schedule for every backend, drawn for a system of the
		// members the flags ask for that carries out every fault; each
		// run fits it to its own system.
		if o.Schedule == nil {
			if o.Schedule, err = harness.DrawSchedule(o); err != nil {
				return exitUnknown, fmt.Errorf("compare: %w", err)
			}
		}
		o.FitSchedule = true
		faults = nemesis.Expand(o.Nemesis.Faults, nil)
		p, err := harness.NewPlan(o)
		if err != nil {
			return exitUnknown, fmt.Errorf("compare: %w", err)
		}
		opts = append(opts, p)
	}
	if err := os.MkdirAll(*rf.out, 0o755); err != nil {
		return exitUnknown, fmt.Errorf("--out: %w", err)
	}
	fmt.Fprintf(stdout, "locktest compare: %d configurations, seed %d, faults %v, %s each\n",
		len(opts), opts[0].Workload.Seed, faults, opts[0].Time)

	ctx, stop := signalContext()
	defer stop()
	var rows []compareRow
	code := exitValid
	for i, o := range opts {
		if ctx.Err() != nil {
			break
		}
		var err error
		if o.Dir, err = harness.NewRunDir(*rf.out, o.Workload.Seed); err != nil {
			return exitUnknown, err
		}
		res, err := o.Run(ctx)
		if err != nil {
			harness.Discard(o.Dir)
			return exitUnknown, fmt.Errorf("%s with %s: %w", configs[i].recipe, configs[i].mode, err)
		}
		writeReport(io.Discard, filepath.Join(o.Dir, "report.html"), res)
		row := compareRow{Recipe: configs[i].recipe, Backend: o.Backend, Resource: configs[i].mode, Clients: o.Workload.Clients, Dir: o.Dir,
			Verdicts: map[string]checker.Verdict{}, Overlaps: res.MutexOverlaps, Exit: res.Exit}
		for _, c := range res.Checks {
			row.Verdicts[c.Name] = c.Verdict
			if c.Verdict == checker.Invalid {
				row.Violations += len(c.Violations)
			}
		}
		if s := res.Run; s != nil {
			row.System = s.System
			if o.Schedule != nil {
				row.Faults = len(o.Schedule.Entries) - len(s.Dropped)
			}
			for _, e := range s.Dropped {
				row.Dropped = append(row.Dropped, e.Fault)
			}
			row.Acquisitions, row.PerSecond = s.Stats.Acquisitions, s.AcquirePerSec
			row.P50, row.P70, row.P90, row.P99 = s.Stats.AcquireP50, s.Stats.AcquireP70, s.Stats.AcquireP90, s.Stats.AcquireP99
			if n := time.Duration(s.Stats.Acquisitions); n > 0 {
				row.CPUPerAcq = s.CPU / n
				if s.ServerCPU != nil {
					d := *s.ServerCPU / n
					row.ServerCPUPerAcq = &d
				}
			}
		}
		rows = append(rows, row)
		code = max(code, res.Exit)
		fmt.Fprintf(stdout, "  done %d/%d: %s, %s, %d clients: %s\n", i+1, len(opts), row.Recipe, row.Resource, row.Clients, res.Verdict)
	}
	printCompare(stdout, rows)
	b, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return exitUnknown, err
	}
	path := filepath.Join(*rf.out, fmt.Sprintf("compare-%s.json", time.Now().Format("20060102-150405")))
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return exitUnknown, err
	}
	fmt.Fprintf(stdout, "table: %s\n", relPath(path))
	writeIndex(stdout, *rf.out)
	if ctx.Err() != nil {
		return exitUnknown, nil
	}
	return code, nil
}

func printCompare(w io.Writer, rows []compareRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "recipe\tbackend\tresource\tclients\tfaults\t"+strings.Join(checker.Names(), "\t")+"\tviolations\toverlaps\tacquisitions\tacq/s\tp50\tp70\tp90\tp99\tclient CPU/acq\tserver CPU/acq")
	dropped := false
	for _, r := range rows {
		faults := strconv.Itoa(r.Faults)
		if len(r.Dropped) > 0 {
			faults += fmt.Sprintf(" (%d dropped)", len(r.Dropped))
			dropped = true
		}
		server := "in process"
		if r.ServerCPUPerAcq != nil {
			server = ms(*r.ServerCPUPerAcq)
		}
		verdicts := ""
		for _, name := range checker.Names() {
			verdicts += string(r.Verdicts[name]) + "\t"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s%d\t%d\t%d\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\n",
			r.Recipe, r.Backend, r.Resource, r.Clients, faults, verdicts,
			r.Violations, r.Overlaps, r.Acquisitions, r.PerSecond, ms(r.P50), ms(r.P70), ms(r.P90), ms(r.P99), ms(r.CPUPerAcq), server)
	}
	tw.Flush()
	for _, r := range rows {
		if len(r.Dropped) > 0 {
			fmt.Fprintf(w, "%s (%s) could not carry out %s of the schedule: %s\n", r.Recipe, r.Backend, words.Plural(len(r.Dropped), "fault"), countKinds(r.Dropped))
		}
	}
	if dropped {
		fmt.Fprintln(w, "(a dropped fault is left out of that run only; the others are the same faults, scheduled at the same times, in every run)")
	}
	fmt.Fprintln(w, "client CPU is locktest's own process (clients, toxiproxy, servers embedded in it); server CPU is the servers' own processes")
}

// countKinds says how many faults of each kind a list holds, in order of
// first appearance: "lease-starve ×2, crash-leader".
func countKinds(kinds []string) string {
	var order []string
	n := map[string]int{}
	for _, k := range kinds {
		if n[k] == 0 {
			order = append(order, k)
		}
		n[k]++
	}
	for i, k := range order {
		if n[k] > 1 {
			order[i] = fmt.Sprintf("%s ×%d", k, n[k])
		}
	}
	return strings.Join(order, ", ")
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + "ms"
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// stringFlag lets a second flag name set the same string.
type stringFlag struct{ p *string }

func (f stringFlag) String() string {
	if f.p == nil {
		return ""
	}
	return *f.p
}
func (f stringFlag) Set(s string) error { *f.p = s; return nil }
