package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/internal/words"
	"github.com/locktest/locktest/resource"
	"github.com/locktest/locktest/scenario"
)

const scenarioUsage = `Usage:
  locktest scenario list              the catalog: each scenario, what it shows, the verdicts it expects
  locktest scenario list --bugs       the upstream bugs it reproduces, as a table (--json: as JSON)
  locktest scenario run NAME [flags]  play one (see locktest scenario run --help)
`

func scenarioCmd(bs *backend.Set, args []string, stdout io.Writer) (int, error) {
	catalog := bs.Catalog()
	if len(args) == 0 {
		return exitUnknown, fmt.Errorf("scenario: want list or run NAME (scenarios: %s)", strings.Join(catalog.Names(), ", "))
	}
	switch args[0] {
	case "list":
		fs := newFlags("scenario list", "scenario list [--bugs [--json]]\n\nLists the catalog of scenarios: each one's name, what it shows and the verdicts it expects;\nwith --bugs, the table of the upstream bugs they reproduce.", stdout)
		bugs := fs.Bool("bugs", false, "list the upstream bugs the catalog reproduces, a Markdown table: reference, ecosystem, affected and fixed versions, the version reproduced, scenario, contrast, last reproduced, random faults' catch rate")
		asJSON := fs.Bool("json", false, "with --bugs: the table as JSON, for CI tools")
		if err := parseFlags(fs, args[1:]); err != nil {
			return exitUnknown, err
		}
		if fs.NArg() > 0 {
			return exitUnknown, fmt.Errorf("scenario list: unexpected argument %q", fs.Arg(0))
		}
		if *asJSON && !*bugs {
			return exitUnknown, fmt.Errorf("scenario list: --json is for --bugs")
		}
		if *bugs {
			return exitValid, bugTable(stdout, catalog.Entries(), *asJSON)
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		for _, sc := range catalog {
			fmt.Fprintf(tw, "%s\t%s\n", sc.Name, sc.Line())
			fmt.Fprintf(tw, "\texpects: %s\n", expectations(sc))
			for _, b := range sc.Bugs {
				fmt.Fprintf(tw, "\tupstream bug: %s\n", b)
			}
		}
		tw.Flush()
		return exitValid, nil
	case "run":
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, scenarioUsage)
		return exitUnknown, flag.ErrHelp
	default:
		return exitUnknown, fmt.Errorf("scenario: unknown subcommand %q%s (want list or run NAME)", args[0], words.DidYouMean(args[0], []string{"list", "run"}))
	}
	fs := newFlags("scenario run", "scenario run NAME [flags]\n\nPlays a scenario of the catalog (locktest scenario list): its scripted faults and the\nworkload settings it needs. Every flag of run applies and overrides the scenario's.\nExit status: 0 when every verdict is the one the scenario expects (the harm it shows included),\n1 when one came out otherwise, 2 when one is unknown or an error.", stdout)
	rf := addRunFlags(fs, bs)
	lf := addLiveFlags(fs)
	if err := parseFlags(fs, args[1:]); err != nil {
		return exitUnknown, err
	}
	if fs.NArg() == 0 {
		return exitUnknown, fmt.Errorf("scenario run: want a scenario name (one of %s)", strings.Join(catalog.Names(), ", "))
	}
	if fs.NArg() > 1 {
		return exitUnknown, fmt.Errorf("scenario run: unexpected argument %q", fs.Arg(1))
	}
	sc, err := catalog.Lookup(fs.Arg(0))
	if err != nil {
		return exitUnknown, err
	}
	if err := rf.play(sc); err != nil {
		return exitUnknown, err
	}
	// What the scenario needs, as the command line left it.
	settings := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { settings[f.Name] = f.Value.String() })
	if err := bs.Missing(settings); err != nil {
		return exitUnknown, fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	o, err := rf.scenarioOptions(sc)
	if err != nil {
		return exitUnknown, fmt.Errorf("scenario run: %w", err)
	}
	p, err := harness.NewPlan(o)
	if err != nil {
		return exitUnknown, fmt.Errorf("scenario run: %w", err)
	}
	return runOne(p, rf, lf, stdout)
}

// play readies the flags for a run of scenario sc: its recipe, its backend
// and its backend's system settings (by the backend's flag names), which
// decide how the options are built, where the command line gives none.
// The rest of its settings come over the options (stage).
func (f *runFlags) play(sc scenario.Scenario) error {
	s := sc.Settings()
	if s.Recipe != "" && !f.set("recipe") {
		*f.recipe = s.Recipe
	}
	if s.Backend != "" && !f.set("backend") {
		*f.backend = s.Backend
	}
	for _, name := range slices.Sorted(maps.Keys(s.System)) {
		if !f.set(name) {
			if err := f.fs.Set(name, s.System[name]); err != nil {
				return fmt.Errorf("scenario %s: flag --%s=%s: %w", sc.Name, name, s.System[name], err)
			}
		}
	}
	return nil
}

// scenarioOptions are the options of a run of scenario sc (after play):
// the flags' options with the scenario staged over them (stage).
func (f *runFlags) scenarioOptions(sc scenario.Scenario) (harness.Options, error) {
	o, err := f.options()
	if err != nil {
		return o, err
	}
	return o, f.stage(&o, sc)
}

// stage makes o, built from the flags (after play), play scenario sc: its
// settings as harness.Apply sets them, but those the command line gives,
// which override a scenario's; then the scenario itself (harness.Stage).
func (f *runFlags) stage(o *harness.Options, sc scenario.Scenario) error {
	s := sc.Settings()
	s.Recipe, s.Backend, s.System = "", "", nil // play's
	given := f.set
	if given("workload") {
		s.Workload = ""
	}
	if given("items") {
		s.Items = 0
	}
	if given("clients") {
		s.Clients = 0
	}
	if given("ttl") {
		s.TTL = 0
	}
	if given("time") {
		s.Time = 0
	}
	if given("quiet") {
		s.Quiet = 0
	}
	if given("liveness-bound") {
		s.LivenessBound = 0
	}
	if given("op-timeout") {
		s.OpTimeout = 0
	}
	if s.Think > 0 && given("think") {
		s.Think = *f.thinkMax
	}
	if s.Think > 0 && given("think-min") {
		s.ThinkMin = *f.thinkMin
	}
	if given("slow-share") {
		s.NoSlow = false
	}
	if given("guard") {
		s.Guard = ""
	}
	if given("require") {
		s.Require = nil
	}
	if err := o.Apply(s); err != nil {
		return fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	o.Stage(sc)
	return nil
}

// missing says what this machine lacks to play scenario settings s with
// recipe on backend ("": the recipe's own), as backend.Set's Missing.
func missing(bs *backend.Set, s scenario.Settings, recipe, backend string) error {
	settings := maps.Clone(s.System)
	if settings == nil {
		settings = map[string]string{}
	}
	settings["recipe"], settings["backend"] = recipe, backend
	return bs.Missing(settings)
}

// expectations says in a line what sc expects of each resource mode and of
// the recipes it names.
func expectations(sc scenario.Scenario) string {
	var parts []string
	for _, res := range []resource.Mode{resource.Unfenced, resource.Fenced} {
		parts = append(parts, string(res)+" "+(&harness.Scenario{Expect: sc.Expect[string(res)]}).ExpectText())
	}
	for _, r := range slices.Sorted(maps.Keys(sc.ByRecipe)) {
		parts = append(parts, scenario.RecipeFlags([]string{r})+" "+(&harness.Scenario{Expect: sc.ByRecipe[r]}).ExpectText())
	}
	return strings.Join(parts, "; ")
}

// bugTable writes the catalog's upstream bugs: a Markdown table, or JSON.
func bugTable(w io.Writer, entries []scenario.Entry, asJSON bool) error {
	if asJSON {
		b, err := json.MarshalIndent(entries, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	cell := func(s string) string {
		if s == "" {
			return "-"
		}
		return strings.ReplaceAll(s, "|", "\\|")
	}
	fmt.Fprintln(w, "| reference | ecosystem | affected | upstream | reproduced in | scenario | shows it | contrast (passes) | last reproduced | --nemesis all, 30 s |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, e := range entries {
		shows := scenario.RecipeFlags(e.Recipes)
		if len(e.Recipes) == 0 {
			shows = "every recipe it plays"
		}
		fmt.Fprintf(w, "| [%s](%s) | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", e.Ref, e.URL, cell(e.Ecosystem), cell(e.Affected),
			cell(e.Status), cell(e.Seen), e.Scenario, cell(shows), cell(scenario.RecipeFlags(e.Contrasts)), cell(e.Reproduced), cell(e.Random))
	}
	return nil
}
