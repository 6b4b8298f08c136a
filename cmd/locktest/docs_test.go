package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/locktest/locktest/backend/registry"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/nemesis"
)

// The pages a newcomer reads first say what locktest is today: the
// README's first paragraph and locktest's usage name the lock services it
// runs (every registered backend), and the usage lists every command
// locktest takes.
func TestNewcomerPages(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The first paragraph is the one after the two commands.
	paras := strings.Split(string(readme), "\n\n")
	i := slices.IndexFunc(paras, func(p string) bool { return strings.Contains(p, "go test ./...") })
	if i < 0 || i+1 >= len(paras) {
		t.Fatalf("README has no paragraph after its commands")
	}
	first := strings.Join(strings.Fields(paras[i+1]), " ")
	usageLine, _, _ := strings.Cut(usage, "\n")
	for _, page := range []struct{ name, text string }{{"README's first paragraph", first}, {"usage line", usageLine}} {
		for _, b := range registry.Backends().All() {
			if !strings.Contains(strings.ToLower(page.text), strings.ToLower(b.Name)) {
				t.Errorf("the %s does not name %s: %q", page.name, b.Name, page.text)
			}
		}
	}

	// The commands mainArgs takes are those its error for an unknown one names.
	_, _, stderr := runMain(t, "no-such-command")
	m := regexp.MustCompile(`\(want (.*)\)`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("unknown command: %q", stderr)
	}
	commands := strings.FieldsFunc(strings.ReplaceAll(m[1], " or ", ", "), func(r rune) bool { return r == ',' || r == ' ' })
	if len(commands) < 9 {
		t.Fatalf("commands %v", commands)
	}
	for _, c := range commands {
		if !strings.Contains(usage, "  locktest "+c+" ") {
			t.Errorf("usage does not list %s:\n%s", c, usage)
		}
		if code, stdout, _ := runMain(t, c, "--help"); code != exitValid || !strings.Contains(stdout, "Usage:") {
			t.Errorf("locktest %s --help: exit %d, %q", c, code, stdout)
		}
	}
}

// The reference pages in docs/reference are what `locktest docs` writes
// from the registries now: a fault family, recipe, scenario, bug or check
// added (or a flag changed) without regenerating them fails here, and
// nothing else is in that directory.
func TestReferencePages(t *testing.T) {
	dir := filepath.Join("..", "..", referenceDir)
	pages := referencePages()
	for name, want := range pages {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%v: run 'go run ./cmd/locktest docs' from the repository's root", err)
			continue
		}
		if string(got) != want {
			t.Errorf("%s/%s differs from what the code says (%s): run 'go run ./cmd/locktest docs' from the repository's root and commit it", referenceDir, name, firstDiff(string(got), want))
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := pages[e.Name()]; !ok {
			t.Errorf("%s/%s is no page `locktest docs` writes", referenceDir, e.Name())
		}
	}
}

// firstDiff names the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		if i >= len(g) || i >= len(w) || g[i] != w[i] {
			return fmt.Sprintf("first at line %d", i+1)
		}
	}
	return "same lines"
}

// Every registered fault family, recipe and check says what it does: the
// reference's rows are their words.
func TestRegistriesDocumented(t *testing.T) {
	for _, f := range nemesis.Families() {
		if strings.TrimSpace(f.Spec().Doc) == "" {
			t.Errorf("fault family %s has no Doc", f.Spec().Name)
		}
	}
	for _, b := range registry.Backends().All() {
		for _, r := range b.Recipes {
			if strings.TrimSpace(r.Doc) == "" {
				t.Errorf("recipe %s (%s) has no Doc", r.Name, b.Name)
			}
		}
	}
	// How to read a verdict (docs/checks.md) explains every check at length.
	howTo, err := os.ReadFile(filepath.Join("..", "..", "docs", "checks.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range checker.Checks() {
		if strings.TrimSpace(c.Doc) == "" {
			t.Errorf("check %s has no Doc", c.Name)
		}
		if !strings.Contains(string(howTo), "\n- `"+c.Name+"`: ") {
			t.Errorf("docs/checks.md does not explain check %s (a line '- `%s`: ...')", c.Name, c.Name)
		}
	}
	for _, sc := range registry.Backends().Catalog() {
		if strings.TrimSpace(sc.Summary) == "" || strings.TrimSpace(sc.Lesson) == "" {
			t.Errorf("scenario %s has no summary or lesson", sc.Name)
		}
	}
}

// The contributors' layout table (docs/contributing.md) names every
// package of the tree (a row of its own, or by name in its parent's row),
// and every file it names exists.
func TestLayoutTable(t *testing.T) {
	root := filepath.Join("..", "..")
	page, err := os.ReadFile(filepath.Join(root, "docs", "contributing.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, layout, ok := strings.Cut(string(page), "\n## Layout\n")
	if !ok {
		t.Fatal("docs/contributing.md has no Layout section")
	}
	rows := map[string]string{} // package directory -> what its row says
	cell := regexp.MustCompile("^\\| `([^`]+)/` \\| (.*) \\|$")
	for _, line := range strings.Split(layout, "\n") {
		if m := cell.FindStringSubmatch(line); m != nil {
			rows[m[1]] = m[2]
		}
	}
	if len(rows) == 0 {
		t.Fatal("no rows in the layout table")
	}
	named := regexp.MustCompile("`([^`]+)`")
	for dir, says := range rows {
		for _, m := range named.FindAllStringSubmatch(says, -1) {
			if f := m[1]; strings.HasSuffix(f, ".go") {
				if _, err := os.Stat(filepath.Join(root, dir, f)); err != nil {
					t.Errorf("the layout table's row %s/ names %s: %v", dir, f, err)
				}
			}
		}
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != root || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || filepath.Ext(path) != ".go" || filepath.Dir(path) == root {
			return nil
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		dir = filepath.ToSlash(dir)
		if _, ok := rows[dir]; ok {
			return nil
		}
		parent, base := filepath.Dir(dir), filepath.Base(dir)
		if !strings.Contains(rows[parent], "`"+base+"`") {
			t.Errorf("the layout table has no row for %s/, nor names %s in a row for %s/", dir, base, parent)
			rows[dir] = "(reported)"
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The tree holds no scratch: git ignores what servers started by hand in it
// leave (Sentinel configurations, Redis dumps, etcd's data directory),
// and no tracked file is one it ignores.
func TestTreeKeepsScratchOut(t *testing.T) {
	root := filepath.Join("..", "..")
	if err := exec.Command("git", "-C", root, "rev-parse", "--git-dir").Run(); err != nil {
		t.Skipf("skipped: not a git checkout with git on PATH: %v", err)
	}
	for _, scratch := range []string{"s0/sentinel.conf", "s2/sentinel.conf", "sentinel.conf", "dump.rdb", "appendonly.aof", "default.etcd/member/wal/0.wal"} {
		if err := exec.Command("git", "-C", root, "check-ignore", "-q", "--no-index", scratch).Run(); err != nil {
			t.Errorf("git does not ignore %s: %v", scratch, err)
		}
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "--cached", "--ignored", "--exclude-standard").Output()
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		t.Errorf("tracked files that .gitignore keeps out:\n%s", s)
	}
}
