// Package registry is where locktest's backends are registered, one line
// each, and what the harness and the CLI ask of them all: the backend of a
// recipe, every backend's flags, the catalog of scenarios, the words of a
// history's backend. It is the only package that imports the backends.
package registry

import (
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/backend/etcd"
	"github.com/locktest/locktest/backend/mysql"
	"github.com/locktest/locktest/backend/postgres"
	"github.com/locktest/locktest/backend/redis"
	"github.com/locktest/locktest/backend/zookeeper"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/internal/words"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/resource"
	"github.com/locktest/locktest/scenario"
)

// backends are the registered backends, the default first: a run of no
// recipe in particular, and a history that names no backend, are its.
var backends = []backend.Backend{
	etcd.Backend,
	redis.Backend,
	zookeeper.Backend,
	postgres.Backend,
	mysql.Backend,
}

// All returns the registered backends, the default first.
func All() []backend.Backend { return slices.Clone(backends) }

// Default is the backend of a run of no recipe in particular, and of a
// history that names none.
func Default() backend.Backend { return backends[0] }

// Names lists the registered backends' names, the default first.
func Names() []string {
	names := make([]string, len(backends))
	for i, b := range backends {
		names[i] = b.Name
	}
	return names
}

// Named returns the backend called name.
func Named(name string) (backend.Backend, bool) {
	i := slices.IndexFunc(backends, func(b backend.Backend) bool { return b.Name == name })
	if i < 0 {
		return backend.Backend{}, false
	}
	return backends[i], true
}

// Builtin returns the built-in recipe called name, and its backend.
func Builtin(name string) (lock.Builtin, backend.Backend, bool) {
	for _, b := range backends {
		if i := slices.IndexFunc(b.Recipes, func(r lock.Builtin) bool { return r.Name == name }); i >= 0 {
			return b.Recipes[i], b, true
		}
	}
	return lock.Builtin{}, backend.Backend{}, false
}

// Of returns the backend of recipe: its built-in's, else (a team's own
// recipe) the default.
func Of(recipe string) backend.Backend {
	if _, b, ok := Builtin(recipe); ok {
		return b
	}
	return Default()
}

// For returns the backend a run of recipe has when the run names backend
// (--backend; "" names none): a built-in runs on its own (naming another
// is an error), any other recipe (a team's own, a lock in another process)
// on the one named, else on the default.
func For(recipe, name string) (backend.Backend, error) {
	if name == "" {
		return Of(recipe), nil
	}
	b, ok := Named(name)
	if !ok {
		return backend.Backend{}, fmt.Errorf("--backend: unknown backend %q%s (want one of %s)", name, words.DidYouMean(name, Names()), strings.Join(Names(), ", "))
	}
	if _, own, builtin := Builtin(recipe); builtin && own.Name != b.Name {
		return backend.Backend{}, fmt.Errorf("--backend %s: recipe %s runs on %s", name, recipe, own.Name)
	}
	return b, nil
}

// Choice is a run's recipe, backend and backend options as Resolve
// resolves them.
type Choice struct {
	Backend backend.Backend
	// Options are the backend's options: the run's, else its defaults.
	Options backend.Options
	// Recipe is the lock under test: the run's, else the backend's first
	// built-in; a built-in whose token is no fencing token is marked so
	// (lock.Unfenced).
	Recipe lock.Recipe
	// RecipeName names it; Builtin is it as a built-in, IsBuiltin false
	// for a recipe that is none (a team's own, a lock in another process).
	RecipeName string
	Builtin    lock.Builtin
	IsBuiltin  bool
}

// Resolve is the backend of a run of recipe (nil: the backend's first),
// named backend ("": none) and opts (nil: none): that of opts if set, else
// the one named (a recipe that is not a built-in runs on any backend), else
// the recipe's (the default backend's for one that is not a built-in); its
// default options where opts are nil.
func Resolve(recipe lock.Recipe, name string, opts backend.Options) (Choice, error) {
	var c Choice
	if recipe != nil {
		c.RecipeName = recipe.Name()
	}
	ofOptions := ""
	if opts != nil {
		ofOptions = opts.Backend()
	}
	builtin, own, ok := Builtin(c.RecipeName)
	named, namedOK := Named(name)
	ofSystem, systemOK := Named(ofOptions)
	b := Default()
	if ok {
		b = own
	}
	if name != "" {
		if !namedOK {
			return c, fmt.Errorf("unknown backend %q (want one of %s)", name, strings.Join(Names(), ", "))
		}
		if ok && own.Name != named.Name {
			return c, fmt.Errorf("recipe %s runs on %s, not %s", c.RecipeName, own.Name, named.Name)
		}
		b = named
	}
	if opts != nil {
		if !systemOK {
			return c, fmt.Errorf("harness: options of a backend locktest does not know: %q", ofOptions)
		}
		if ok && own.Name != ofSystem.Name {
			return c, fmt.Errorf("recipe %s runs on %s; the options are %s's", c.RecipeName, own.Name, ofSystem.Name)
		}
		if ofSystem.Name != b.Name && name != "" {
			return c, fmt.Errorf("the run's backend is %s; the options are %s's", b.Name, ofSystem.Name)
		}
		b = ofSystem
	} else {
		opts = b.Defaults()
	}
	if c.RecipeName == "" {
		builtin, ok = b.Recipes[0], true
		c.RecipeName = builtin.Name
	}
	if recipe == nil {
		var err error
		if recipe, err = NewRecipe(builtin.Name, opts); err != nil {
			return c, err
		}
	}
	if ok && builtin.NoFencingToken {
		// A built-in's word, for a recipe made without the registry.
		recipe = lock.MarkUnfenced(recipe)
	}
	c.Backend, c.Options, c.Recipe, c.Builtin, c.IsBuiltin = b, opts, recipe, builtin, ok
	return c, nil
}

// RecipeNames lists the built-in recipes: each backend's, in order, the
// correct ones first.
func RecipeNames() []string {
	var names []string
	for _, b := range backends {
		for _, r := range b.Recipes {
			names = append(names, r.Name)
		}
	}
	return names
}

// NoFencingToken reports whether the built-in recipe of that name has a
// token that is not a fencing token (lock.Builtin.NoFencingToken).
func NoFencingToken(recipe string) bool {
	r, _, ok := Builtin(recipe)
	return ok && r.NoFencingToken
}

// NewRecipe returns the built-in recipe called name, as opts (its
// backend's) make it where they do (backend.Maker), marked lock.Unfenced
// when its token is no fencing token.
func NewRecipe(name string, opts backend.Options) (lock.Recipe, error) {
	r, _, ok := Builtin(name)
	if !ok {
		return nil, fmt.Errorf("unknown lock recipe %q (want one of %v)", name, RecipeNames())
	}
	rec := r.New()
	if m, ok := opts.(backend.Maker); ok {
		if made, ok := m.Recipe(name); ok {
			rec = made
		}
	}
	if r.NoFencingToken {
		return lock.MarkUnfenced(rec), nil
	}
	return rec, nil
}

// Terms are the words of the backend called name; the default's for a
// history that names none. A backend this locktest does not know gets a
// lease lock's words, and the contract orders nothing by revisions.
func Terms(name string) checker.Terms {
	if name == "" {
		return Default().Terms
	}
	if b, ok := Named(name); ok {
		return b.Terms
	}
	t := checker.LeaseTerms
	t.Unordered = fmt.Sprintf("%s is not a backend this locktest knows, so the history cannot order a grant's decision against the server's deletions", name)
	return t
}

// Modules name the Go modules of every backend's servers built into
// locktest, by the key results.json's versions give them.
func Modules() map[string]string {
	out := map[string]string{}
	for _, b := range backends {
		maps.Copy(out, b.Modules)
	}
	return out
}

// Resources are the resource modes every backend keeps in its system.
func Resources() []backend.Resource {
	var out []backend.Resource
	for _, b := range backends {
		out = append(out, b.Resources...)
	}
	return out
}

// ParseResource reads --resource: a mode of the HTTP store, or one a
// backend keeps.
func ParseResource(s string) (resource.Mode, error) {
	var others []string
	for _, r := range Resources() {
		if string(r.Mode) == s {
			return r.Mode, nil
		}
		others = append(others, string(r.Mode))
	}
	return resource.ParseMode(s, others...)
}

// ResourceHelp is --resource's help: every mode and what it is.
func ResourceHelp() string {
	modes := []string{"fenced (rejects stale tokens)", "unfenced"}
	for _, r := range Resources() {
		modes = append(modes, fmt.Sprintf("%s (%s)", r.Mode, r.Help))
	}
	return strings.Join(modes[:len(modes)-1], ", ") + ", or " + modes[len(modes)-1]
}

// Keeper returns the backend that keeps resource mode in its system.
func Keeper(mode resource.Mode) (backend.Backend, bool) {
	for _, b := range backends {
		if slices.ContainsFunc(b.Resources, func(r backend.Resource) bool { return r.Mode == mode }) {
			return b, true
		}
	}
	return backend.Backend{}, false
}

// Catalog is every scenario: those of every lock and each backend's, in
// Topic order, with the backends' extensions.
var Catalog = sync.OnceValue(func() scenario.Catalog {
	var names []string
	var contributed [][]scenario.Scenario
	var ext []scenario.Extension
	for _, b := range backends {
		names = append(names, b.Name)
		contributed = append(contributed, b.Scenarios)
		ext = append(ext, b.Extensions...)
	}
	c, err := scenario.NewCatalog(scenario.Generic, names, contributed, ext)
	if err != nil {
		panic(err) // a backend's scenarios clash: TestCatalog catches it
	}
	return c
})

// Missing says what this machine lacks to run with settings (a scenario's
// run flags, by name), by the backend of their recipe (or the one named by
// "backend"); nil when nothing.
func Missing(settings map[string]string) error {
	b, err := For(settings["recipe"], settings["backend"])
	if err != nil {
		return err
	}
	if b.Missing == nil {
		return nil
	}
	return b.Missing(settings)
}

// Flags are every backend's command-line flags on one FlagSet.
type Flags struct {
	fs    *flag.FlagSet
	names map[string][]string // each backend's flags
	read  map[string]func() (backend.Options, error)
}

// AddFlags adds every backend's flags to fs.
func AddFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{fs: fs, names: map[string][]string{}, read: map[string]func() (backend.Options, error){}}
	for _, b := range backends {
		before := map[string]bool{}
		fs.VisitAll(func(fl *flag.Flag) { before[fl.Name] = true })
		f.read[b.Name] = b.Flags(fs)
		fs.VisitAll(func(fl *flag.Flag) {
			if !before[fl.Name] {
				f.names[b.Name] = append(f.names[b.Name], fl.Name)
			}
		})
	}
	return f
}

// Names are the flags backend b added, in the order it added them (for
// --help, which lists them under b's name).
func (f *Flags) Names(b string) []string { return f.names[b] }

// Options reads the flags of recipe's backend into its Options. With
// strict, a flag of another backend that was set is an error: it would
// do nothing.
func (f *Flags) Options(recipe string, strict bool) (backend.Options, error) {
	return f.OptionsOf(Of(recipe), recipe, strict)
}

// OptionsOf reads the flags of backend b, for a run of recipe, into its
// Options (see Options).
func (f *Flags) OptionsOf(b backend.Backend, recipe string, strict bool) (backend.Options, error) {
	if strict {
		var err error
		f.fs.Visit(func(fl *flag.Flag) {
			for _, other := range backends {
				if err == nil && other.Name != b.Name && slices.Contains(f.names[other.Name], fl.Name) {
					err = fmt.Errorf("--%s is for %s recipes (%s), not %s", fl.Name, other.Name, recipeList(other), recipe)
				}
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return f.read[b.Name]()
}

func recipeList(b backend.Backend) string {
	var names []string
	for _, r := range b.Recipes {
		names = append(names, r.Name)
	}
	return strings.Join(names, ", ")
}
