package main

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/scenario"
	"github.com/locktest/locktest/system"
)

//go:generate go run . docs --out ../../docs/reference

// referenceDir is where `locktest docs` writes the reference, from the
// repository's root.
const referenceDir = "docs/reference"

// generated heads every reference page: they are the registries' own
// words, and a test fails when the committed pages differ from them.
const generated = "<!-- Written by `go run ./cmd/locktest docs` from the code's registries: do not edit; a test fails when it differs. -->\n\n"

func docsCmd(args []string, stdout io.Writer) (int, error) {
	fs := newFlags("docs", "docs [flags]\n\nWrites the reference pages (faults, recipes, scenarios, the bug catalog, checks, CLI flags)\nfrom the code's registries, run from the repository's root.", stdout)
	out := fs.String("out", referenceDir, "directory the pages are written to")
	if err := parseFlags(fs, args); err != nil {
		return exitUnknown, err
	}
	if fs.NArg() > 0 {
		return exitUnknown, fmt.Errorf("docs: unexpected argument %q", fs.Arg(0))
	}
	pages := referencePages()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return exitUnknown, err
	}
	for _, name := range slices.Sorted(maps.Keys(pages)) {
		if err := os.WriteFile(filepath.Join(*out, name), []byte(pages[name]), 0o644); err != nil {
			return exitUnknown, err
		}
		fmt.Fprintf(stdout, "wrote %s\n", filepath.Join(*out, name))
	}
	return exitValid, nil
}

// referencePages are the reference pages by file name.
func referencePages() map[string]string {
	return map[string]string{
		"faults.md":    faultsPage(),
		"recipes.md":   recipesPage(),
		"scenarios.md": scenariosPage(),
		"bugs.md":      bugsPage(),
		"checks.md":    checksPage(),
		"cli.md":       cliPage(),
	}
}

// cell makes text safe in a table cell.
func cell(s string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", `\|`)
}

// sentence starts s with a capital letter.
func sentence(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

func code(words []string) string {
	if len(words) == 0 {
		return "—"
	}
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = "`" + w + "`"
	}
	return strings.Join(out, ", ")
}

// prototype is the system b starts for a run of its first recipe that asks
// for families (none: nothing in particular), not started.
func prototype(b backend.Backend, families ...string) system.System {
	return b.Defaults().Prototype(backend.Plan{Recipe: b.Recipes[0].Name, Families: families})
}

func faultsPage() string {
	var w bytes.Buffer
	w.WriteString(generated)
	w.WriteString("# Reference: fault families\n\n")
	w.WriteString("`--nemesis` takes a comma list of these families, `all` (every family the run's system can carry out, but those asked for by name) or `none`; `--fault-durations FAMILY=MIN-MAX` sets their durations. What each does to a run, and how targets are chosen: [faults](../faults.md).\n\n")
	const ttl = 2 * time.Second
	w.WriteString("| family | kinds | needs of the system | default duration (TTL 2 s) | in `all` | what it does |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, f := range nemesis.Families() {
		spec := f.Spec()
		var needs []string
		for _, c := range nemesis.Needs(spec.Name) {
			needs = append(needs, string(c))
		}
		d := spec.Durations(ttl)
		all := "yes"
		if spec.ByNameOnly {
			all = "by name only"
		}
		fmt.Fprintf(&w, "| `%s` | %s | %s | %s-%s | %s | %s |\n", spec.Name, code(spec.KindNames()), code(needs), d.Min, d.Max, all, cell(spec.Doc))
	}

	w.WriteString("\n## Fault kinds each backend's system carries out\n\n")
	w.WriteString("What a backend's system offers decides which kinds a schedule draws; a run refuses, before anything starts, a family of which its system can carry out no kind, naming what it lacks. With 5 members where the backend lets it be chosen.\n\n")
	bs := ownBackends.All()
	head, rule := "| family |", "| --- |"
	for _, b := range bs {
		head += " " + b.Name + " |"
		rule += " --- |"
	}
	w.WriteString(head + "\n" + rule + "\n")
	for _, f := range nemesis.Families() {
		spec := f.Spec()
		fmt.Fprintf(&w, "| `%s` |", spec.Name)
		for _, b := range bs {
			offers := nemesis.Offered(prototype(b, spec.Name))
			kinds := slices.DeleteFunc(spec.KindNames(), func(k string) bool { return !slices.Contains(offers, k) })
			fmt.Fprintf(&w, " %s |", code(kinds))
		}
		w.WriteString("\n")
	}

	w.WriteString("\n## Capabilities each backend's system offers\n\n")
	w.WriteString("A fault kind needs capabilities of the system under test (package `system`); a backend's system offers them by the interfaces it implements. Some systems change with the faults asked for (Redis adds a replica and Sentinel for `failover`).\n\n")
	w.WriteString(strings.Replace(head, "family", "capability", 1) + "\n" + rule + "\n")
	for _, c := range system.Capabilities() {
		fmt.Fprintf(&w, "| `%s` |", c)
		for _, b := range bs {
			says := "—"
			if system.Has(prototype(b), c) {
				says = "yes"
			} else {
				var with []string
				for _, f := range nemesis.Categories() {
					if system.Has(prototype(b, f), c) {
						with = append(with, "`--nemesis "+f+"`")
					}
				}
				if len(with) > 0 {
					says = "with " + strings.Join(with, " or ")
				}
			}
			fmt.Fprintf(&w, " %s |", says)
		}
		w.WriteString("\n")
	}
	return w.String()
}

func recipesPage() string {
	var w bytes.Buffer
	w.WriteString(generated)
	w.WriteString("# Reference: built-in lock recipes\n\n")
	w.WriteString("`--recipe NAME` picks the lock under test; a built-in recipe runs on its own backend. A lock of your own: [testing your own lock](../own-lock.md). Backends and what they start: [backends and recipes](../backends.md).\n\n")
	for _, b := range ownBackends.All() {
		fmt.Fprintf(&w, "## %s\n\n| recipe | broken on purpose | fencing token | how it locks |\n| --- | --- | --- | --- |\n", b.Name)
		for _, r := range b.Recipes {
			broken, token := "", "yes"
			if r.Broken {
				broken = "yes"
			}
			if r.NoFencingToken {
				token = "no"
			}
			fmt.Fprintf(&w, "| `%s` | %s | %s | %s |\n", r.Name, broken, token, cell(r.Doc))
		}
		w.WriteString("\n")
		if len(b.Resources) > 0 {
			w.WriteString("Resources it keeps in its own system (`--resource`):\n\n")
			for _, res := range b.Resources {
				fmt.Fprintf(&w, "- `%s`: %s\n", res.Mode, res.Help)
			}
			w.WriteString("\n")
		}
	}
	return w.String()
}

func scenariosPage() string {
	var w bytes.Buffer
	w.WriteString(generated)
	w.WriteString("# Reference: the scenario catalog\n\n")
	w.WriteString("Each scenario is a scripted fault schedule and the workload settings that put a lock in the situation, with its lesson and the verdicts it expects; `locktest scenario run NAME` plays it, `locktest scenario list` lists them, and `locktest nightly` plays them all. How to read them: [scenarios and the bug catalog](../scenarios.md).\n\n")
	w.WriteString("| scenario | backend | what happens | expects |\n| --- | --- | --- | --- |\n")
	catalog := ownBackends.Catalog()
	for _, sc := range catalog {
		be := sc.Backend
		if be == "" {
			be = "every lock"
		}
		fmt.Fprintf(&w, "| [`%s`](#%s) | %s | %s | %s |\n", sc.Name, anchor(sc.Name), be, cell(sc.Line()), cell(expectations(sc)))
	}
	topic := scenario.Topic(-1)
	for _, sc := range catalog {
		if sc.Topic != topic {
			topic = sc.Topic
			fmt.Fprintf(&w, "\n## %s\n", topic)
		}
		fmt.Fprintf(&w, "\n### %s\n\n%s.\n\n    locktest scenario run %s\n\n%s\n\n", sc.Name, sentence(sc.Summary), sc.Name, strings.Join(strings.Fields(sc.Lesson), " "))
		if rs := sc.Recipes(); len(rs) > 0 {
			fmt.Fprintf(&w, "- recipes it is played with: %s\n", code(rs))
		}
		fmt.Fprintf(&w, "- expects: %s\n", expectations(sc))
		for _, b := range sc.Bugs {
			fmt.Fprintf(&w, "- upstream bug: [%s](%s), %s\n", b.Ref, b.URL, strings.TrimPrefix(b.String(), b.Ref+" "))
		}
	}
	return w.String()
}

func bugsPage() string {
	var w bytes.Buffer
	w.WriteString(generated)
	w.WriteString("# Reference: the bug catalog\n\n")
	w.WriteString("The upstream bugs locktest reproduces, each by a scenario of the catalog; results.json, the report page and the JUnit case of a run that shows one name it. Write-ups and measurements: [findings](../findings.md).\n\n")
	w.WriteString("| bug | status | seen in | recipes | shows as | reproduce |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, sc := range ownBackends.Catalog() {
		for _, b := range sc.Bugs {
			fmt.Fprintf(&w, "| [%s](%s) | %s | %s | %s | %s | `locktest scenario run %s` |\n", b.Ref, b.URL, cell(b.Status), cell(b.Seen), code(b.Recipes), cell(strings.Join(b.Shows, ", ")), sc.Name)
		}
	}
	return w.String()
}

func checksPage() string {
	var w bytes.Buffer
	w.WriteString(generated)
	w.WriteString("# Reference: checks\n\n")
	w.WriteString("Every check is computed on every run and is `valid`, `invalid` or `unknown` (with a sentence why); `--require` names those whose failure sets the exit status (default `data`: `resource`, and `invariant` where it could judge). How to read a verdict: [checks and verdicts](../checks.md).\n\n")
	w.WriteString("| check | what it judges |\n| --- | --- |\n")
	for _, c := range checker.Checks() {
		fmt.Fprintf(&w, "| `%s` | %s |\n", c.Name, cell(c.Doc))
	}
	return w.String()
}

// command is a line of the usage: "  locktest run [flags]   ...".
var command = regexp.MustCompile(`(?m)^  locktest (\w+)(?: (\w+))?`)

func cliPage() string {
	var w bytes.Buffer
	w.WriteString(generated)
	w.WriteString("# Reference: the command line\n\n")
	w.WriteString("What `locktest` and each of its commands print for `--help`.\n\n```\n" + usage + "```\n")
	seen := map[string]bool{}
	for _, m := range command.FindAllStringSubmatch(usage, -1) {
		args := []string{m[1]}
		if m[1] == "scenario" {
			args = append(args, m[2])
		}
		name := strings.Join(args, " ")
		if seen[name] {
			continue
		}
		seen[name] = true
		var out bytes.Buffer
		mainArgs(ownBackends, append(args, "--help"), &out, io.Discard)
		fmt.Fprintf(&w, "\n## locktest %s\n\n```\n%s```\n", name, out.String())
	}
	return w.String()
}

// notInAnchor are the characters a heading's anchor drops.
var notInAnchor = regexp.MustCompile(`[^\p{L}\p{N} _-]`)

// anchor is the anchor a Markdown heading gets, as GitHub makes it:
// lower case, punctuation dropped ("etcd-mutex-3.4" is #etcd-mutex-34),
// spaces made hyphens.
func anchor(heading string) string {
	return strings.ReplaceAll(notInAnchor.ReplaceAllString(strings.ToLower(strings.TrimSpace(heading)), ""), " ", "-")
}
