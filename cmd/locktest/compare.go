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

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/histories"
)

// compareRow is one configuration's line of the compare table.
type compareRow struct {
	Recipe       string                     `json:"recipe"`
	Resource     string                     `json:"resource"`
	Clients      int                        `json:"clients"`
	Dir          string                     `json:"dir"`
	Verdicts     map[string]checker.Verdict `json:"verdicts"`
	Violations   int                        `json:"violations"`
	Overlaps     int                        `json:"mutex_overlaps"`
	Acquisitions int                        `json:"acquisitions"`
	PerSecond    float64                    `json:"acquisitions_per_second"`
	P50          time.Duration              `json:"acquire_p50_ns"`
	P90          time.Duration              `json:"acquire_p90_ns"`
	P99          time.Duration              `json:"acquire_p99_ns"`
	CPUPerAcq    time.Duration              `json:"cpu_per_acquisition_ns"`
	Exit         int                        `json:"exit"`
}

func compareCmd(args []string, stdout io.Writer) (int, error) {
	fs := newFlags("compare", "compare [flags]\n\nRuns several lock recipes, resource modes and client counts under the same seeded fault\nschedule, one after another on fresh clusters, and prints one table.\n--recipe (or --recipes), --resource and --clients take comma lists here; every other flag is run's.", stdout)
	rf := addRunFlags(fs)
	fs.Var(stringFlag{rf.recipe}, "recipes", "same as --recipe")
	if err := parseFlags(fs, args); err != nil {
		return exitUnknown, err
	}
	if fs.NArg() > 0 {
		return exitUnknown, fmt.Errorf("compare: unexpected argument %q (see locktest compare --help)", fs.Arg(0))
	}
	recipes, modes, clients := splitList(*rf.recipe), splitList(*rf.mode), splitList(*rf.clients)
	type config struct{ recipe, mode, clients string }
	var configs []config
	for _, c := range clients {
		for _, r := range recipes {
			for _, m := range modes {
				configs = append(configs, config{r, m, c})
			}
		}
	}
	// Check every combination before starting any run.
	var opts []harness.Options
	for _, c := range configs {
		*rf.recipe, *rf.mode, *rf.clients = c.recipe, c.mode, c.clients
		o, err := rf.options()
		if err != nil {
			return exitUnknown, fmt.Errorf("compare: %w", err)
		}
		opts = append(opts, o)
	}
	if err := os.MkdirAll(*rf.out, 0o755); err != nil {
		return exitUnknown, fmt.Errorf("--out: %w", err)
	}
	fmt.Fprintf(stdout, "locktest compare: %d configurations, seed %d, faults %v, %s each\n",
		len(opts), opts[0].Workload.Seed, opts[0].Nemesis.Faults, opts[0].Time)

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
		o.Command = reproduce(o)
		res, err := harness.Run(ctx, o)
		if err != nil {
			return exitUnknown, fmt.Errorf("%s with %s: %w", configs[i].recipe, configs[i].mode, err)
		}
		writeReport(io.Discard, filepath.Join(o.Dir, "report.html"), res)
		row := compareRow{Recipe: configs[i].recipe, Resource: configs[i].mode, Clients: o.Workload.Clients, Dir: o.Dir,
			Verdicts: map[string]checker.Verdict{}, Overlaps: res.MutexOverlaps, Exit: res.Exit}
		for _, c := range res.Checks {
			row.Verdicts[c.Name] = c.Verdict
			if c.Verdict == checker.Invalid {
				row.Violations += len(c.Violations)
			}
		}
		if s := res.Run; s != nil {
			row.Acquisitions, row.PerSecond = s.Stats.Acquisitions, s.AcquirePerSec
			row.P50, row.P90, row.P99 = s.Stats.AcquireP50, s.Stats.AcquireP90, s.Stats.AcquireP99
			if s.Stats.Acquisitions > 0 {
				row.CPUPerAcq = s.CPU / time.Duration(s.Stats.Acquisitions)
			}
		}
		rows = append(rows, row)
		code = max(code, res.Exit)
		fmt.Fprintf(stdout, "  done %d/%d: %s, %s, %d clients: %s\n", i+1, len(opts), row.Recipe, row.Resource, row.Clients, res.Verdict)
	}
	printCompare(stdout, rows)
	b, _ := json.MarshalIndent(rows, "", "  ")
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
	fmt.Fprintln(tw, "recipe\tresource\tclients\tmutex\tresource\tinvariant\tliveness\tconsistency\tviolations\toverlaps\tacquisitions\tacq/s\tp50\tp90\tp99\tCPU/acq")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%.1f\t%s\t%s\t%s\t%s\n",
			r.Recipe, r.Resource, r.Clients, r.Verdicts[histories.CheckMutex], r.Verdicts[histories.CheckResource], r.Verdicts[histories.CheckInvariant], r.Verdicts[histories.CheckLiveness], r.Verdicts[histories.CheckConsistency],
			r.Violations, r.Overlaps, r.Acquisitions, r.PerSecond, ms(r.P50), ms(r.P90), ms(r.P99), ms(r.CPUPerAcq))
	}
	tw.Flush()
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
