package main

import (
	"cmp"
	"context"
	"flag"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/backend/registry"
	"github.com/locktest/locktest/internal/shellwords"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/lock/execlock"
	"github.com/locktest/locktest/scenario"
)

// The registry's own tests (backend/registry): they live here, in a test
// binary that links every backend anyway, because a test binary of the
// registry's own links them all again (the embedded etcd server among
// them) for a tenth of a second of tests.

// Every built-in recipe is found by name, with its backend; an unknown one
// is refused with the known ones listed.
func TestRegistryRecipes(t *testing.T) {
	names := registry.Backends().RecipeNames()
	n := 0
	for _, b := range registry.Backends().All() {
		n += len(b.Recipes)
		for _, r := range b.Recipes {
			if registry.Backends().Of(r.Name).Name != b.Name {
				t.Errorf("%s is of %s, not %s", r.Name, registry.Backends().Of(r.Name).Name, b.Name)
			}
			rec, err := registry.Backends().NewRecipe(r.Name, b.Defaults())
			if err != nil || rec.Name() != r.Name {
				t.Fatalf("NewRecipe(%q) = %v, %v", r.Name, rec, err)
			}
			if _, unfenced := rec.(lock.Unfenced); unfenced != r.NoFencingToken || registry.Backends().NoFencingToken(r.Name) != r.NoFencingToken {
				t.Errorf("%s: marked unfenced %v, its built-in says %v", r.Name, unfenced, r.NoFencingToken)
			}
		}
	}
	if len(names) != n || len(slices.Compact(slices.Sorted(slices.Values(names)))) != n {
		t.Errorf("recipe names %v: %d backends' recipes, or a name twice", names, n)
	}
	if _, err := registry.Backends().NewRecipe("bogus", nil); err == nil || !strings.Contains(err.Error(), names[0]) {
		t.Errorf("unknown recipe: %v, want an error listing the known ones", err)
	}
	if registry.Backends().Of("a-teams-own").Name != registry.Backends().Default().Name {
		t.Error("a recipe of no backend is not the default's")
	}
}

// A recipe refuses a connection of another backend, with an error that
// says so, rather than failing later.
func TestRegistryRecipeRefusesOtherConnections(t *testing.T) {
	for _, b := range registry.Backends().All() {
		r, err := registry.Backends().NewRecipe(b.Recipes[0].Name, b.Defaults())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.New(context.Background(), lock.Env{Conn: "tcp://127.0.0.1:1", TTL: 2, Name: "c0"}); err == nil || !strings.Contains(err.Error(), "needs") {
			t.Errorf("%s's %s with another connection: %v", b.Name, r.Name(), err)
		}
	}
}

// A backend's flags are its own: one another backend's recipe was given
// is refused, unless leniently read (compare). Each flag of every other
// backend, given a value of its own kind (its default, or "x").
func TestRegistryFlags(t *testing.T) {
	seen := map[string]string{}
	f := registry.Backends().AddFlags(flag.NewFlagSet("t", flag.ContinueOnError))
	for _, b := range registry.Backends().All() {
		for _, n := range f.Names(b.Name) {
			seen[n] = b.Name
		}
	}
	recipe := registry.Backends().Default().Recipes[0].Name
	others := 0
	for _, other := range slices.Sorted(maps.Keys(seen)) {
		if seen[other] == registry.Backends().Default().Name {
			continue
		}
		others++
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := registry.Backends().AddFlags(fs)
		value := cmp.Or(fs.Lookup(other).DefValue, "x")
		if err := fs.Parse([]string{"--" + other + "=" + value}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Options(recipe, true); err == nil || !strings.Contains(err.Error(), "--"+other+" is for "+seen[other]) {
			t.Errorf("--%s with %s: %v", other, recipe, err)
		}
		if o, err := f.Options(recipe, false); err != nil || o.Backend() != registry.Backends().Default().Name {
			t.Errorf("lenient --%s: %v, %v", other, o, err)
		}
	}
	if others == 0 || len(seen) == others {
		t.Skipf("need flags of two backends, got %v", seen)
	}
}

// Every scenario of the catalog is well-formed: a unique name, a summary
// and a lesson of two to four sentences, expectations for both resources,
// a schedule that validates for 3 and 5 members, and a recipe and flags of
// its own backend.
func TestRegistryCatalog(t *testing.T) {
	c := registry.Backends().Catalog()
	for _, sc := range c {
		if sc.Summary == "" || strings.Contains(sc.Line(), "\n") {
			t.Errorf("%s: summary %q", sc.Name, sc.Summary)
		}
		if n := strings.Count(sc.Lesson, ". "); n < 1 || n > 4 {
			t.Errorf("%s: lesson of %d sentences: %q", sc.Name, n+1, sc.Lesson)
		}
		for _, res := range []string{scenario.Unfenced, scenario.Fenced} {
			if len(sc.Expect[res]) == 0 {
				t.Errorf("%s: no expectation with the %s resource", sc.Name, res)
			}
		}
		for _, members := range []int{3, 5} {
			s := sc.Schedule(1, scenario.Shape{Members: members, Clients: []string{"c0", "c1", "c2"}, TTL: 2 * time.Second})
			if err := s.Validate(); err != nil {
				t.Errorf("%s, %d members: %v", sc.Name, members, err)
			}
		}
		if r := sc.Run.Recipe; r != "" && !execlock.IsSpec(r) && registry.Backends().Of(r).Name != sc.Backend {
			t.Errorf("%s, a scenario of %q, runs %s, a recipe of %s", sc.Name, sc.Backend, r, registry.Backends().Of(r).Name)
		}
		for _, r := range sc.Recipes() {
			if execlock.IsSpec(r) {
				adapterOf(t, sc, r)
			} else if _, _, ok := registry.Backends().Builtin(r); !ok {
				t.Errorf("%s expects of %s, which is no recipe", sc.Name, r)
			}
		}
		for _, b := range sc.Bugs {
			if b.Ref == "" || !strings.HasPrefix(b.URL, "https://") || b.Seen == "" || b.Status == "" {
				t.Errorf("%s: bug %+v lacks its reference, address, versions or status", sc.Name, b)
			}
			for _, r := range b.Recipes {
				if !slices.Contains(sc.Recipes(), r) {
					t.Errorf("%s: bug %s shown by %s, a recipe it does not play (%v)", sc.Name, b.Ref, r, sc.Recipes())
				}
			}
		}
	}
}

// adapterOf checks an exec recipe of scenario sc: it runs on the
// scenario's backend, and its command names an adapter of
// execlock.Adapters, which Parse finds from here, a folder below the
// repository's root (as nightly run elsewhere than at the root would),
// the recipe's name kept as the catalog spells it.
func adapterOf(t *testing.T, sc scenario.Scenario, spec string) {
	t.Helper()
	if sc.Run.Backend != sc.Backend {
		t.Errorf("%s, a scenario of %q, runs %s on %q", sc.Name, sc.Backend, spec, sc.Run.Backend)
	}
	words, err := shellwords.Split(strings.TrimPrefix(spec, execlock.Prefix))
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(words, func(w string) bool { return strings.HasPrefix(w, execlock.Adapters+"/") })
	if i < 0 {
		t.Errorf("%s: %s names no adapter of %s", sc.Name, spec, execlock.Adapters)
		return
	}
	r, err := execlock.Parse(spec)
	if err != nil {
		t.Errorf("%s: %v", sc.Name, err)
		return
	}
	want, _ := filepath.Abs(filepath.Join("..", "..", words[i]))
	if r.Command[i] != want || r.Name() != spec {
		t.Errorf("%s: %s runs %s as %s, want %s", sc.Name, r.Name(), words[i], r.Command[i], want)
	}
	if _, err := os.Stat(r.Command[i]); err != nil {
		t.Errorf("%s: %v", sc.Name, err)
	}
}

// The catalog lists the scenarios in the order of their topics, the
// scenarios of every lock first: these in the order locktest scenario list
// has always printed them (a new backend's go among them by topic).
func TestRegistryCatalogOrder(t *testing.T) {
	want := []string{"paused-holder", "partitioned-holder", "lease-revoked", "delayed-write", "clock-guard", "oversold",
		"oversold-redis", "failover-redis", "redlock-restart", "redlock-clock", "waiter-expiry", "etcd-11456", "etcd-22082",
		"election-phantom", "leader-loss"}
	got := slices.DeleteFunc(registry.Backends().Catalog().Names(), func(n string) bool { return !slices.Contains(want, n) })
	if !slices.Equal(got, want) {
		t.Errorf("catalog %v, want %v in this order", registry.Backends().Catalog().Names(), want)
	}
	we, _ := registry.Backends().Catalog().Lookup("waiter-expiry")
	if we.Expected("mutex-3.4", scenario.Fenced)["contract"] != scenario.Invalid || we.Expected("mutex", scenario.Unfenced)["contract"] != scenario.Valid ||
		we.Line() != "a queued waiter's lease expires while it waits (etcd#11456, etcd#11051)" {
		t.Errorf("waiter-expiry: %q expects %v of mutex-3.4 and %v of mutex", we.Line(), we.Expected("mutex-3.4", scenario.Fenced), we.Expected("mutex", scenario.Unfenced))
	}
}

// The words of a history: its backend's, the default's for one that
// names none, and for a backend this locktest does not know, no ordering.
func TestRegistryTerms(t *testing.T) {
	if registry.Backends().Terms("") != registry.Backends().Default().Terms {
		t.Error("a history that names no backend does not get the default's words")
	}
	for _, b := range registry.Backends().All() {
		if registry.Backends().Terms(b.Name) != b.Terms {
			t.Errorf("%s: not its own words", b.Name)
		}
	}
	if u := registry.Backends().Terms("carrier-pigeon").Unordered; !strings.Contains(u, "carrier-pigeon") {
		t.Errorf("an unknown backend's contract: %q", u)
	}
}

// --resource takes the HTTP store's modes and those a backend keeps.
func TestRegistryResources(t *testing.T) {
	for _, r := range registry.Backends().Resources() {
		if m, err := registry.Backends().ParseResource(string(r.Mode)); err != nil || m != r.Mode {
			t.Errorf("%s: %v %v", r.Mode, m, err)
		}
		if _, ok := registry.Backends().Keeper(r.Mode); !ok {
			t.Errorf("%s kept by no backend", r.Mode)
		}
		if !strings.Contains(registry.Backends().ResourceHelp(), string(r.Mode)+" (") {
			t.Errorf("help %q lacks %s", registry.Backends().ResourceHelp(), r.Mode)
		}
	}
	if _, err := registry.Backends().ParseResource("fencd"); err == nil || !strings.Contains(err.Error(), "fenced, unfenced") {
		t.Errorf("a bad mode: %v", err)
	}
}
