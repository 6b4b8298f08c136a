package main

import (
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/resource"
	"github.com/locktest/locktest/scenario"
)

const scenarioUsage = `Usage:
  locktest scenario list              the catalog: each scenario, what it shows, the verdicts it expects
  locktest scenario run NAME [flags]  play one (see locktest scenario run --help)
`

func scenarioCmd(args []string, stdout io.Writer) (int, error) {
	if len(args) == 0 {
		return exitUnknown, fmt.Errorf("scenario: want list or run NAME (scenarios: %s)", strings.Join(scenario.Names(), ", "))
	}
	switch args[0] {
	case "list":
		fs := newFlags("scenario list", "scenario list\n\nLists the catalog of scenarios: each one's name, what it shows and the verdicts it expects.", stdout)
		if err := parseFlags(fs, args[1:]); err != nil {
			return exitUnknown, err
		}
		if fs.NArg() > 0 {
			return exitUnknown, fmt.Errorf("scenario list: unexpected argument %q", fs.Arg(0))
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		for _, sc := range scenario.Catalog {
			fmt.Fprintf(tw, "%s\t%s\n", sc.Name, sc.Summary)
			fmt.Fprintf(tw, "\texpects: %s\n", expectations(sc))
		}
		tw.Flush()
		return exitValid, nil
	case "run":
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, scenarioUsage)
		return exitUnknown, flag.ErrHelp
	default:
		return exitUnknown, fmt.Errorf("scenario: unknown subcommand %q (want list or run NAME)", args[0])
	}
	fs := newFlags("scenario run", "scenario run NAME [flags]\n\nPlays a scenario of the catalog (locktest scenario list): its scripted faults and the\nworkload settings it needs. Every flag of run applies and overrides the scenario's.", stdout)
	rf := addRunFlags(fs)
	if err := parseFlags(fs, args[1:]); err != nil {
		return exitUnknown, err
	}
	if fs.NArg() == 0 {
		return exitUnknown, fmt.Errorf("scenario run: want a scenario name (one of %s)", strings.Join(scenario.Names(), ", "))
	}
	if fs.NArg() > 1 {
		return exitUnknown, fmt.Errorf("scenario run: unexpected argument %q", fs.Arg(1))
	}
	sc, err := scenario.Lookup(fs.Arg(0))
	if err != nil {
		return exitUnknown, err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for name, v := range sc.Settings() {
		if !given[name] {
			if err := fs.Set(name, v); err != nil {
				return exitUnknown, fmt.Errorf("scenario %s: flag --%s=%s: %w", sc.Name, name, v, err)
			}
		}
	}
	if err := sc.Missing(); err != nil && !given["etcd-bin"] && !given["redis-bin"] {
		return exitUnknown, fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	o, err := rf.options()
	if err != nil {
		return exitUnknown, fmt.Errorf("scenario run: %w", err)
	}
	play(&o, sc, *rf.recipe)
	return runOne(o, rf, stdout)
}

// play sets o up to play sc with recipe: its lesson, the verdicts it
// expects, and its scripted schedule unless o replays one.
func play(o *harness.Options, sc scenario.Scenario, recipe string) {
	o.Scenario = &harness.Scenario{Name: sc.Name, Lesson: sc.Lesson, Expect: sc.Expected(recipe, string(o.Resource))}
	if o.Schedule == nil {
		s := sc.Schedule(o.Workload.Seed, scenario.Shape{Members: o.Members, Clients: clientNames(o.Workload.Clients),
			TTL: time.Duration(o.Workload.TTL) * time.Second})
		// A Redis recipe's servers depend on its faults (a failover
		// needs a replica).
		if n, ok := harness.RedisServers(recipe, s.Families()); ok {
			s.Members = n
		}
		o.Schedule = &s
	}
}

func clientNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("c%d", i)
	}
	return out
}

// expectations says in a line what sc expects of each resource mode and of
// the recipes it names.
func expectations(sc scenario.Scenario) string {
	var parts []string
	for _, res := range []resource.Mode{resource.Unfenced, resource.Fenced} {
		parts = append(parts, string(res)+" "+(&harness.Scenario{Expect: sc.Expect[string(res)]}).ExpectText())
	}
	for _, r := range slices.Sorted(maps.Keys(sc.ByRecipe)) {
		parts = append(parts, "--recipe "+r+" "+(&harness.Scenario{Expect: sc.ByRecipe[r]}).ExpectText())
	}
	return strings.Join(parts, "; ")
}
