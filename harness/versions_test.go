package harness

import (
	"maps"
	"runtime"
	"runtime/debug"
	"slices"
	"testing"
)

// What produced a run, from the build's information: the commit marked
// when the tree had changes, a replaced module by what was built in, the
// backends' servers by their names, and nothing made up where the build
// recorded nothing.
func TestBuildVersions(t *testing.T) {
	t.Parallel()
	info := &debug.BuildInfo{
		Main: debug.Module{Path: "github.com/locktest/locktest", Version: "v0.0.0-20261124210318-6eadce4aa12b+dirty"},
		Deps: []*debug.Module{
			{Path: "github.com/Shopify/toxiproxy/v2", Version: "v2.12.0", Replace: &debug.Module{Path: "example.com/toxiproxy", Version: "v2.12.1-fork"}},
			{Path: "github.com/anishathalye/porcupine", Version: "v1.3.1"},
		},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "6eadce4aa12b"}, {Key: "vcs.modified", Value: "true"}},
	}
	want := []Component{{"locktest", info.Main.Version}, {"commit", "6eadce4aa12b+dirty"}, {"go", runtime.Version()}}
	none := slices.Clone(want[:3])
	none[0].Version, none[1].Version = "", ""
	for _, b := range backends.All() {
		for _, module := range slices.Sorted(maps.Keys(b.Modules)) {
			info.Deps = append(info.Deps, &debug.Module{Path: module, Version: "v9.9." + b.Name})
			want = append(want, Component{b.Modules[module], "v9.9." + b.Name})
			none = append(none, Component{b.Modules[module], ""})
		}
	}
	want = append(want, Component{"toxiproxy", "v2.12.1-fork"}, Component{"porcupine", "v1.3.1"})
	none = append(none, Component{"toxiproxy", ""}, Component{"porcupine", ""})
	if len(want) < 6 {
		t.Fatalf("no backend builds a server in: %v", want)
	}
	if got := buildVersions(backends, info); !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	info.Settings = []debug.BuildSetting{{Key: "vcs.revision", Value: "6eadce4aa12b"}, {Key: "vcs.modified", Value: "false"}}
	if got := buildVersions(backends, info)[1]; got.Version != "6eadce4aa12b" {
		t.Errorf("clean tree: commit %q", got.Version)
	}
	if got := buildVersions(backends, nil); !slices.Equal(got, none) {
		t.Errorf("no build info: got %v, want %v", got, none)
	}
}
