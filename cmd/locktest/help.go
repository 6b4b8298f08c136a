package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// A command's --help: its synopsis, the flags a newcomer reaches for first,
// then the rest under headings (its own, run's by topic, each backend's),
// each written as typed (--nemesis), and a few examples.

// group is a heading of --help and the flags under it, in order.
type group struct {
	title string
	names []string
}

// runGroups are the flags of run (and of the commands that take them) by
// topic.
var runGroups = []group{
	{"Lock and workload", []string{"recipe", "backend", "exec-clock", "clients", "locks", "workload", "items", "ttl", "think", "think-min", "slow-share", "slow-think", "op-timeout", "guard"}},
	{"Faults", []string{"nemesis", "nemesis-mix", "nemesis-interval", "fault-durations", "schedule", "steer", "members", "time", "quiet"}},
	{"Checks", []string{"resource", "require", "check-timeout", "liveness-bound"}},
	{"Output", []string{"out", "seed", "live", "live-addr"}},
}

// commandHelp is what a command's --help puts first: the flags most runs
// set, and examples.
type commandHelp struct {
	common   []string
	examples []string
}

var helps = map[string]commandHelp{
	"run": {[]string{"recipe", "nemesis", "time", "resource", "clients", "seed", "live"}, []string{
		"locktest run                                        # etcd's mutex under pause, lease and isolate faults, 15 s",
		"locktest run --recipe redlock --nemesis all --time 30s",
		"locktest run --live                                 # watch the run in a browser as it goes",
	}},
	"scenario run": {[]string{"resource", "recipe", "seed", "live"}, []string{
		"locktest scenario run paused-holder --resource unfenced   # shows the harm: exit 0 when it does",
		"locktest scenario run etcd-22082 --recipe mutex-retry-owned",
	}},
	"check": {[]string{"require"}, []string{
		"locktest check runs/latest",
		"locktest check history.jsonl --require all",
	}},
	"nightly": {[]string{"budget", "recipes", "junit", "shard"}, []string{
		"locktest nightly --budget 20m --junit junit.xml",
		"locktest nightly --budget 1h --recipes mutex,redlock,zk-lock --shard 1/2",
	}},
	"sweep": {[]string{"seeds", "first-seed", "recipe", "nemesis", "time"}, []string{
		"locktest sweep --seeds 20 --nemesis pause --time 10s",
	}},
	"compare": {[]string{"recipes", "resource", "clients", "nemesis", "time"}, []string{
		"locktest compare --recipes mutex,redlock,zk-lock --resource fenced,unfenced --nemesis pause",
	}},
	"shrink": {[]string{"replays", "budget", "check"}, []string{
		"locktest shrink runs/latest",
	}},
	"serve":  {[]string{"addr"}, []string{"locktest serve runs                # the index, each run's report, and runs in progress live"}},
	"report": {nil, []string{"locktest report runs"}},
}

// printHelp writes the --help of command name, whose flags are fs.
func printHelp(w io.Writer, fs *flag.FlagSet, name, synopsis string) {
	fmt.Fprintf(w, "Usage: locktest %s\n", synopsis)
	h := helps[name]
	var all []string
	fs.VisitAll(func(f *flag.Flag) { all = append(all, f.Name) })
	if len(all) == 0 && len(h.examples) == 0 {
		return
	}
	done := map[string]bool{}
	section := func(title string, names []string) {
		var lines []string
		for _, n := range names {
			f := fs.Lookup(n)
			if f == nil || done[n] {
				continue
			}
			done[n] = true
			lines = append(lines, flagLine(f))
		}
		if len(lines) > 0 {
			fmt.Fprintf(w, "\n%s:\n%s", title, strings.Join(lines, ""))
		}
	}
	section("Common flags", h.common)
	// The command's own flags: neither run's nor a backend's.
	var own []string
	backends, perBackend := backendFlags()
	known := slices.Concat(runFlagNames(), slices.Concat(perBackend...))
	for _, n := range all {
		if !slices.Contains(known, n) {
			own = append(own, n)
		}
	}
	title := "Flags"
	if len(h.common) > 0 {
		title = "More " + name + " flags"
	}
	section(title, own)
	for _, g := range runGroups {
		section(g.title, g.names)
	}
	for i, b := range backends {
		section(b+" (its recipes only)", perBackend[i])
	}
	section("Other flags", all)
	if len(h.examples) > 0 {
		fmt.Fprintf(w, "\nExamples:\n  %s\n", strings.Join(h.examples, "\n  "))
	}
}

// flagLine is a flag as --help writes it: "  --name VALUE" and its usage
// with its default on the next line.
func flagLine(f *flag.Flag) string {
	value, usage := flag.UnquoteUsage(f)
	line := "  --" + f.Name
	if value != "" {
		line += " " + value
	}
	switch {
	case slices.Contains([]string{"", "0", "false", "0s"}, f.DefValue):
	case value == "string":
		usage += fmt.Sprintf(" (default %q)", f.DefValue)
	default:
		usage += " (default " + f.DefValue + ")"
	}
	return line + "\n        " + usage + "\n"
}

// runFlagNames are the flags addRunFlags defines, the backends' aside.
func runFlagNames() []string {
	var names []string
	for _, g := range runGroups {
		names = append(names, g.names...)
	}
	return names
}

// backendFlags are the backends' names and the flags of each.
func backendFlags() (names []string, flags [][]string) {
	f := ownBackends.AddFlags(flag.NewFlagSet("", flag.ContinueOnError))
	for _, b := range ownBackends.All() {
		names = append(names, b.Name)
		flags = append(flags, f.Names(b.Name))
	}
	return names, flags
}
