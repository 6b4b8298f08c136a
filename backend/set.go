package backend

import (
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/internal/words"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/resource"
	"github.com/locktest/locktest/scenario"
)

// Set is the backends a locktest knows, the default first, and what the
// harness and the CLI ask of them all: the backend of a recipe, every
// backend's flags, the catalog of scenarios, the words of a history's
// backend. Package backend/registry holds locktest's own (registry.Backends)
// and is the only package that imports the backends: the harness is given
// a Set, so that what imports the harness links no server it is not given.
type Set struct {
	backends []Backend
	catalog  func() scenario.Catalog
}

// NewSet is the set of backends, the default first: a run of no recipe in
// particular, and a history that names no backend, are its.
func NewSet(backends ...Backend) *Set {
	if len(backends) == 0 {
		panic("backend.NewSet: no backend")
	}
	s := &Set{backends: backends}
	s.catalog = sync.OnceValue(s.makeCatalog)
	return s
}

// All returns the backends, the default first.
func (s *Set) All() []Backend { return slices.Clone(s.backends) }

// Default is the backend of a run of no recipe in particular, and of a
// history that names none.
func (s *Set) Default() Backend { return s.backends[0] }

// Names lists the backends' names, the default first.
func (s *Set) Names() []string {
	names := make([]string, len(s.backends))
	for i, b := range s.backends {
		names[i] = b.Name
	}
	return names
}

// Named returns the backend called name.
func (s *Set) Named(name string) (Backend, bool) {
	i := slices.IndexFunc(s.backends, func(b Backend) bool { return b.Name == name })
	if i < 0 {
		return Backend{}, false
	}
	return s.backends[i], true
}

// Builtin returns the built-in recipe called name, and its backend.
func (s *Set) Builtin(name string) (lock.Builtin, Backend, bool) {
	for _, b := range s.backends {
		if i := slices.IndexFunc(b.Recipes, func(r lock.Builtin) bool { return r.Name == name }); i >= 0 {
			return b.Recipes[i], b, true
		}
	}
	return lock.Builtin{}, Backend{}, false
}

// Of returns the backend of recipe: its built-in's, else (a team's own
// recipe) the default.
func (s *Set) Of(recipe string) Backend {
	if _, b, ok := s.Builtin(recipe); ok {
		return b
	}
	return s.Default()
}

// For returns the backend a run of recipe has when the run names backend
// (--backend; "" names none): a built-in runs on its own (naming another
// is an error), any other recipe (a team's own, a lock in another process)
// on the one named, else on the default.
func (s *Set) For(recipe, name string) (Backend, error) {
	if name == "" {
		return s.Of(recipe), nil
	}
	b, ok := s.Named(name)
	if !ok {
		return Backend{}, fmt.Errorf("--backend: unknown backend %q%s (want one of %s)", name, words.DidYouMean(name, s.Names()), strings.Join(s.Names(), ", "))
	}
	if _, own, builtin := s.Builtin(recipe); builtin && own.Name != b.Name {
		return Backend{}, fmt.Errorf("--backend %s: recipe %s runs on %s", name, recipe, own.Name)
	}
	return b, nil
}

// Choice is a run's recipe, backend and backend options as Resolve
// resolves them.
type Choice struct {
	Backend Backend
	// Options are the backend's options: the run's, else its defaults.
	Options Options
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
func (s *Set) Resolve(recipe lock.Recipe, name string, opts Options) (Choice, error) {
	var c Choice
	if recipe != nil {
		c.RecipeName = recipe.Name()
	}
	ofOptions := ""
	if opts != nil {
		ofOptions = opts.Backend()
	}
	builtin, own, ok := s.Builtin(c.RecipeName)
	named, namedOK := s.Named(name)
	ofSystem, systemOK := s.Named(ofOptions)
	b := s.Default()
	if ok {
		b = own
	}
	if name != "" {
		if !namedOK {
			return c, fmt.Errorf("unknown backend %q (want one of %s)", name, strings.Join(s.Names(), ", "))
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
		if recipe, err = s.NewRecipe(builtin.Name, opts); err != nil {
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
func (s *Set) RecipeNames() []string {
	var names []string
	for _, b := range s.backends {
		for _, r := range b.Recipes {
			names = append(names, r.Name)
		}
	}
	return names
}

// NoFencingToken reports whether the built-in recipe of that name has a
// token that is not a fencing token (lock.Builtin.NoFencingToken).
func (s *Set) NoFencingToken(recipe string) bool {
	r, _, ok := s.Builtin(recipe)
	return ok && r.NoFencingToken
}

// NewRecipe returns the built-in recipe called name, as opts (its
// backend's) make it where they do (Maker), marked lock.Unfenced
// when its token is no fencing token.
func (s *Set) NewRecipe(name string, opts Options) (lock.Recipe, error) {
	r, _, ok := s.Builtin(name)
	if !ok {
		return nil, fmt.Errorf("unknown lock recipe %q (want one of %v)", name, s.RecipeNames())
	}
	rec := r.New()
	if m, ok := opts.(Maker); ok {
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
func (s *Set) Terms(name string) checker.Terms {
	if name == "" {
		return s.Default().Terms
	}
	if b, ok := s.Named(name); ok {
		return b.Terms
	}
	t := checker.LeaseTerms
	t.Unordered = fmt.Sprintf("%s is not a backend this locktest knows, so the history cannot order a grant's decision against the server's deletions", name)
	return t
}

// Modules name the Go modules of every backend's servers built into
// locktest, by the key results.json's versions give them.
func (s *Set) Modules() map[string]string {
	out := map[string]string{}
	for _, b := range s.backends {
		maps.Copy(out, b.Modules)
	}
	return out
}

// Resources are the resource modes every backend keeps in its system.
func (s *Set) Resources() []Resource {
	var out []Resource
	for _, b := range s.backends {
		out = append(out, b.Resources...)
	}
	return out
}

// ParseResource reads --resource: a mode of the HTTP store, or one a
// backend keeps.
func (s *Set) ParseResource(mode string) (resource.Mode, error) {
	var others []string
	for _, r := range s.Resources() {
		if string(r.Mode) == mode {
			return r.Mode, nil
		}
		others = append(others, string(r.Mode))
	}
	return resource.ParseMode(mode, others...)
}

// ResourceHelp is --resource's help: every mode and what it is.
func (s *Set) ResourceHelp() string {
	modes := []string{"fenced (rejects stale tokens)", "unfenced"}
	for _, r := range s.Resources() {
		modes = append(modes, fmt.Sprintf("%s (%s)", r.Mode, r.Help))
	}
	return strings.Join(modes[:len(modes)-1], ", ") + ", or " + modes[len(modes)-1]
}

// Keeper returns the backend that keeps resource mode in its system.
func (s *Set) Keeper(mode resource.Mode) (Backend, bool) {
	for _, b := range s.backends {
		if slices.ContainsFunc(b.Resources, func(r Resource) bool { return r.Mode == mode }) {
			return b, true
		}
	}
	return Backend{}, false
}

// Catalog is every scenario: those of every lock and each backend's, in
// Topic order, with the backends' extensions.
func (s *Set) Catalog() scenario.Catalog { return s.catalog() }

// makeCatalog makes the catalog (once: Catalog).
func (s *Set) makeCatalog() scenario.Catalog {
	var names []string
	var contributed [][]scenario.Scenario
	var ext []scenario.Extension
	for _, b := range s.backends {
		names = append(names, b.Name)
		contributed = append(contributed, b.Scenarios)
		ext = append(ext, b.Extensions...)
	}
	c, err := scenario.NewCatalog(scenario.Generic, names, contributed, ext)
	if err != nil {
		panic(err) // a backend's scenarios clash: TestCatalog catches it
	}
	return c
}

// Missing says what this machine lacks to run with settings (a scenario's
// run flags, by name), by the backend of their recipe (or the one named by
// "backend"); nil when nothing.
func (s *Set) Missing(settings map[string]string) error {
	b, err := s.For(settings["recipe"], settings["backend"])
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
	set   *Set
	fs    *flag.FlagSet
	names map[string][]string // each backend's flags
	read  map[string]func() (Options, error)
}

// AddFlags adds every backend's flags to fs.
func (s *Set) AddFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{set: s, fs: fs, names: map[string][]string{}, read: map[string]func() (Options, error){}}
	for _, b := range s.backends {
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
func (f *Flags) Options(recipe string, strict bool) (Options, error) {
	return f.OptionsOf(f.set.Of(recipe), recipe, strict)
}

// OptionsOf reads the flags of backend b, for a run of recipe, into its
// Options (see Options).
func (f *Flags) OptionsOf(b Backend, recipe string, strict bool) (Options, error) {
	if strict {
		var err error
		f.fs.Visit(func(fl *flag.Flag) {
			for _, other := range f.set.backends {
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

func recipeList(b Backend) string {
	var names []string
	for _, r := range b.Recipes {
		names = append(names, r.Name)
	}
	return strings.Join(names, ", ")
}
