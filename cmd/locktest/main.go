// Command locktest tests distributed locks: it starts the real servers of
// the recipe's backend (backend/) behind toxiproxy, lets clients contend for
// locks and write to a protected resource, records every operation, and
// checks the history.
//
// Exit status follows Jepsen: 0 valid, 1 a violation found, 2 unknown or an
// error.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/backend/registry"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/internal/scratch"
	"github.com/locktest/locktest/internal/words"
)

// Exit statuses.
const (
	exitValid   = harness.ExitValid
	exitInvalid = harness.ExitInvalid
	exitUnknown = harness.ExitUnknown
)

// usage names the lock services locktest runs: the registered backends.
var usage = `locktest: a fault-injection and correctness testbed for distributed locks on ` + backendNames() + `

Usage:
  locktest run [flags]            start the servers, run the workload under faults, check the history
  locktest check PATH [flags]     re-check a stored history (a file or a run directory)
  locktest scenario list          the catalog of classic split-brains
  locktest scenario run NAME      play one: its scripted faults, its lesson, its verdicts
  locktest nightly [flags]        the CI job: every scenario, then random faults, within a budget
  locktest shrink RUNDIR [flags]  shrink a failing run's schedule to the fewest faults that still fail it
  locktest sweep [flags]          run one configuration over many seeds and summarise
  locktest power [flags]          how often random faults find the catalogued bugs, and how soon
  locktest compare [flags]        run several recipes, resources, client counts side by side
  locktest report DIR             write DIR/index.html over the run directories under DIR
  locktest serve DIR [flags]      serve DIR's reports read-only on 127.0.0.1:8080
  locktest docs [flags]           write the reference pages (docs/reference/) from the code's registries
  locktest version                locktest's version and commit, and those of the servers, toxiproxy, porcupine built in

Run 'locktest COMMAND --help' for a command's flags. Flags may come before or after
a command's arguments; '--' ends them.
Exit status: 0 valid, 1 a required check found a violation, 2 unknown or an error; a scenario
run's is its expectations': 0 when every verdict is the one it expects, harm included.
`

// ownBackends are locktest's own backends: those main gives the commands
// (mainArgs), which run on and judge histories by the set they are given
// (a test of the CLI's own logic gives them the fake backend, in memory,
// and may run beside others); and those the usage, the help, the
// reference pages and the version name.
var ownBackends = registry.Backends()

// commands are locktest's commands, for the nearest to a mistyped one.
var commands = []string{"run", "check", "scenario", "nightly", "shrink", "sweep", "power", "compare", "report", "serve", "docs", "version", "help"}

// backendNames are the registered backends' names, as a phrase: "etcd, redis and zookeeper".
func backendNames() string {
	var names []string
	for _, b := range ownBackends.All() {
		names = append(names, b.Name)
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

func main() {
	os.Exit(mainArgs(ownBackends, os.Args[1:], os.Stdout, os.Stderr))
}

func mainArgs(bs *backend.Set, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUnknown
	}
	sweepTemp(stderr)
	var err error
	code := exitUnknown
	switch args[0] {
	case "run":
		code, err = runCmd(bs, args[1:], stdout)
	case "check":
		code, err = checkCmd(bs, args[1:], stdout)
	case "shrink":
		code, err = shrinkCmd(bs, args[1:], stdout, stderr)
	case "sweep":
		code, err = sweepCmd(bs, args[1:], stdout)
	case "power":
		code, err = powerCmd(bs, args[1:], stdout)
	case "scenario":
		code, err = scenarioCmd(bs, args[1:], stdout)
	case "nightly":
		code, err = nightlyCmd(bs, args[1:], stdout, stderr)
	case "compare":
		code, err = compareCmd(bs, args[1:], stdout)
	case "report":
		code, err = reportCmd(args[1:], stdout)
	case "serve":
		code, err = serveCmd(bs, args[1:], stdout)
	case "docs":
		code, err = docsCmd(args[1:], stdout)
	case "version", "-version", "--version":
		code, err = versionCmd(args[1:], stdout)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitValid
	default:
		err = fmt.Errorf("unknown command %q%s (want run, check, scenario, nightly, shrink, sweep, power, compare, report, serve, docs or version)", args[0], words.DidYouMean(args[0], commands))
	}
	if errors.Is(err, flag.ErrHelp) {
		return exitValid
	}
	if err != nil {
		fmt.Fprintf(stderr, "locktest: %s\n", words.OneLine(err))
		return exitUnknown
	}
	return code
}

// sweepTemp removes the scratch directories that killed processes left in
// the temporary directory (those of clusters started without a run
// directory, by tests and by earlier versions), and says so in one line.
func sweepTemp(w io.Writer) {
	r, err := scratch.Sweep(os.TempDir())
	if line := r.String(); line != "" {
		fmt.Fprintf(w, "locktest: %s\n", line)
	}
	if err != nil {
		fmt.Fprintf(w, "locktest: removing what killed runs left: %s\n", words.OneLine(err))
	}
}

// newFlags returns a flag set whose errors come back to the caller instead of
// being printed with the whole usage text, and whose --help goes to stdout.
func newFlags(name, synopsis string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() { printHelp(stdout, fs, name, synopsis) }
	return fs
}

// parseFlags parses args, printing the usage for --help. Flags and
// arguments may come in any order ("check PATH --require all" is "check
// --require all PATH"), as git and go take them: Parse stops at the first
// argument, which is kept, and parsing goes on after it. "--" ends the
// flags: all that follows is an argument. Afterwards fs.Args() holds the
// arguments, in their order.
func parseFlags(fs *flag.FlagSet, args []string) error {
	// The flag package prints the usage itself, for --help and for every
	// error too: the help would come twice, and a bad flag would bring the
	// whole of it to stdout beside its one-line error.
	help := fs.Usage
	fs.Usage = func() {}
	defer func() { fs.Usage = help }()
	var positional []string
	for len(args) > 0 {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			help()
			return err
		}
		if err != nil {
			return fmt.Errorf("%s: %s (see locktest %s --help)", fs.Name(), flagError(fs, err), fs.Name())
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if endedFlags(fs, args[:len(args)-len(rest)]) {
			positional = append(positional, rest...)
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	// Parsed after "--", the arguments set no flag and become fs.Args().
	return fs.Parse(append([]string{"--"}, positional...))
}

// flagError says what the flag package found wrong with flags as a user
// types them (--nemesis, not -nemesis), with the flag nearest a mistyped
// one: "unknown flag --nemsis; did you mean --nemesis?".
func flagError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		name = strings.TrimLeft(name, "-")
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if n := words.Nearest(name, names); n != "" {
			return fmt.Sprintf("unknown flag --%s; did you mean --%s?", name, n)
		}
		return "unknown flag --" + name
	}
	return dashes.ReplaceAllString(msg, "$1 --$2")
}

// dashes finds the flag package's "-name" in its messages.
var dashes = regexp.MustCompile(`(flag|for) -([a-z])`)

// endedFlags reports whether Parse, having taken these arguments as flags
// and their values, stopped at the terminator "--" (rather than at an
// argument after a flag whose value was "--").
func endedFlags(fs *flag.FlagSet, taken []string) bool {
	for i := 0; i < len(taken); i++ {
		if taken[i] == "--" {
			return true
		}
		name, _, inline := strings.Cut(strings.TrimLeft(taken[i], "-"), "=")
		if f := fs.Lookup(name); !inline && f != nil && !isBoolFlag(f) {
			i++ // its value
		}
	}
	return false
}

// isBoolFlag reports whether f takes no value (--public, not --public true),
// as the flag package decides it.
func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
