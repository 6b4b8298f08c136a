package main

import (
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/locktest/locktest/backend/registry"
)

// versionLines reads locktest version's output: name, then version.
func versionLines(t *testing.T, out string) ([]string, map[string]string) {
	t.Helper()
	var names []string
	v := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("version line %q", line)
		}
		names = append(names, name)
		v[name] = strings.TrimSpace(value)
	}
	return names, v
}

// locktest version and locktest --version print locktest's version and
// commit, Go's, and the built-in etcd, toxiproxy and porcupine at the
// versions go.mod pins, by the names results.json records them under.
func TestVersion(t *testing.T) {
	code, out, stderr := runMain(t, "version")
	if code != exitValid || stderr != "" {
		t.Fatalf("version: exit %d, stderr %q", code, stderr)
	}
	if code, again, _ := runMain(t, "--version"); code != exitValid || again != out {
		t.Errorf("--version: exit %d, %q; want %q", code, again, out)
	}
	names, v := versionLines(t, out)
	want := []string{"locktest", "commit", "go"}
	modules := map[string]string{"toxiproxy": "github.com/Shopify/toxiproxy/v2", "porcupine": "github.com/anishathalye/porcupine"}
	for _, b := range registry.Backends().All() { // the servers a backend builds in
		for _, module := range slices.Sorted(maps.Keys(b.Modules)) {
			want = append(want, b.Modules[module])
			modules[b.Modules[module]] = module
		}
	}
	if want = append(want, "toxiproxy", "porcupine"); !slices.Equal(names, want) || len(want) < 6 {
		t.Fatalf("version prints %v, want %v:\n%s", names, want, out)
	}
	gomod, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for name, module := range modules {
		m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(module) + `\s+(\S+)`).FindSubmatch(gomod)
		if m == nil || v[name] != string(m[1]) {
			t.Errorf("version says %s %q; go.mod pins %s at %q", name, v[name], module, m)
		}
	}
	if v["go"] != runtime.Version() || v["locktest"] == "" || v["commit"] == "" {
		t.Errorf("version: go %q (want %s), locktest %q, commit %q", v["go"], runtime.Version(), v["locktest"], v["commit"])
	}

	// results.json records the same, under the same names.
	dir := t.TempDir()
	history := filepath.Join(dir, "h.jsonl")
	write(t, history, pausedHolder)
	runMain(t, "check", history)
	b, err := os.ReadFile(filepath.Join(dir, "h.results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res struct{ Versions map[string]string }
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	for name, got := range res.Versions {
		if v[name] != got {
			t.Errorf("results.json records %s %q, version prints %q", name, got, v[name])
		}
	}
	for _, name := range want[2:] {
		if _, ok := res.Versions[name]; !ok {
			t.Errorf("results.json lacks %s: %v", name, res.Versions)
		}
	}
}

// A locktest built from a git checkout prints the commit it was built from,
// as the build recorded it (go build stamps it; go run and -buildvcs=false
// do not). The build is of testdata/stamped, a main package of this module
// as locktest is, which prints harness.BuildVersions as locktest version
// does (TestVersion: the command prints it; harness's TestBuildVersions:
// how it reads a build's information): Go stamps every main package of the
// module alike, and the package links in 2 s of CPU where locktest's 700
// packages took 7-11 s. A subtest of TestRuns, beside the runs.
func testVersionCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	head, err := exec.Command("git", "-C", filepath.Join("..", ".."), "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("skipped: not a git checkout with git on PATH: %v", err)
	}
	gobin, err := exec.LookPath("go") // go test puts its own first on PATH
	if err != nil {
		t.Skipf("skipped: no go command on PATH: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "stamped")
	build := exec.Command(gobin, "build", "-buildvcs=true", "-o", bin, "./testdata/stamped")
	build.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	_, v := versionLines(t, string(out))
	if v["commit"] == "" {
		// Go stamps no commit in a git worktree (.git is a file there).
		t.Skip("skipped: go build recorded no commit here (a git worktree?)")
	}
	dirty, err := exec.Command("git", "-C", filepath.Join("..", ".."), "status", "--porcelain").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSpace(string(head))
	if len(dirty) > 0 {
		want += "+dirty"
	}
	if v["commit"] != want {
		t.Errorf("the build says commit %q; the checkout is at %q", v["commit"], want)
	}
	if v["locktest"] == "(devel)" {
		t.Errorf("the build says locktest %q; want the module version Go stamps from the commit", v["locktest"])
	}
}
