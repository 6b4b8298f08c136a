package harness

import (
	"maps"
	"runtime"
	"runtime/debug"
	"slices"

	"github.com/locktest/locktest/backend"
)

// Component is one part of what produced a run, and its version.
type Component struct{ Name, Version string }

// builtIn are the modules built into locktest that are no backend's (a
// backend names its servers' own: backend.Backend.Modules), by the names a
// run's results give their versions under.
var builtIn = []struct{ name, module string }{
	{"toxiproxy", "github.com/Shopify/toxiproxy/v2"},
	{"porcupine", "github.com/anishathalye/porcupine"},
}

// BuildVersions lists what produced a run, from the binary's build info, in
// this order: locktest (its module version), its commit (the build's
// vcs.revision, with "+dirty" when the tree had uncommitted changes), Go,
// the servers the backends build in (etcd's), toxiproxy and porcupine. A
// version the build did not record is "" (go build -buildvcs=false records
// no commit). results.json holds them as "versions"; locktest version
// prints them.
func BuildVersions(backends *backend.Set) []Component {
	info, _ := debug.ReadBuildInfo()
	return buildVersions(backends, info)
}

func buildVersions(backends *backend.Set, info *debug.BuildInfo) []Component {
	var main, commit string
	deps := map[string]string{}
	if info != nil {
		main = info.Main.Version
		dirty := ""
		for _, s := range info.Settings {
			switch {
			case s.Key == "vcs.revision":
				commit = s.Value
			case s.Key == "vcs.modified" && s.Value == "true":
				dirty = "+dirty"
			}
		}
		if commit != "" {
			commit += dirty
		}
		for _, d := range info.Deps {
			deps[d.Path] = d.Version
			if d.Replace != nil { // what was built in
				deps[d.Path] = d.Replace.Version
			}
		}
	}
	out := []Component{{"locktest", main}, {"commit", commit}, {"go", runtime.Version()}}
	for _, b := range backends.All() {
		for _, module := range slices.Sorted(maps.Keys(b.Modules)) {
			out = append(out, Component{b.Modules[module], deps[module]})
		}
	}
	for _, b := range builtIn {
		out = append(out, Component{b.name, deps[b.module]})
	}
	return out
}

// versions is BuildVersions as results.json records them: those known.
func versions(backends *backend.Set) map[string]string {
	v := map[string]string{}
	for _, c := range BuildVersions(backends) {
		if c.Version != "" {
			v[c.Name] = c.Version
		}
	}
	return v
}
