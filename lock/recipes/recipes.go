// Package recipes looks up the built-in lock recipes of every backend by
// name: the names --recipe accepts. A backend is its package's Builtins
// list, and one line in backends.
package recipes

import (
	"fmt"
	"slices"

	"github.com/locktest/locktest/backend/etcd/etcdlock"
	"github.com/locktest/locktest/backend/redis/redislock"
	"github.com/locktest/locktest/lock"
)

var backends = [][]lock.Builtin{
	etcdlock.Builtins,
	redislock.Builtins,
}

func all() []lock.Builtin {
	var out []lock.Builtin
	for _, b := range backends {
		out = append(out, b...)
	}
	return out
}

// Names lists the built-in recipes: each backend's correct ones, then its
// broken ones.
func Names() []string {
	var names []string
	for _, b := range all() {
		names = append(names, b.Name)
	}
	return names
}

// Broken reports whether a built-in recipe is broken on purpose.
func Broken(name string) bool {
	i := slices.IndexFunc(all(), func(b lock.Builtin) bool { return b.Name == name })
	return i >= 0 && all()[i].Broken
}

// NoFencingToken reports whether the built-in recipe of that name has a
// token that is not a fencing token (lock.Builtin.NoFencingToken).
func NoFencingToken(name string) bool {
	i := slices.IndexFunc(all(), func(b lock.Builtin) bool { return b.Name == name })
	return i >= 0 && all()[i].NoFencingToken
}

// Lookup returns the built-in recipe called name.
func Lookup(name string) (lock.Recipe, error) {
	for _, b := range all() {
		if b.Name == name {
			return b.New(), nil
		}
	}
	return nil, fmt.Errorf("unknown lock recipe %q (want one of %v)", name, Names())
}
