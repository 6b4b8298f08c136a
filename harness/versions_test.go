package harness

import (
	"runtime"
	"runtime/debug"
	"slices"
	"testing"
)

// What produced a run, from the build's information: the commit marked
// when the tree had changes, a replaced module by what was built in, and
// nothing made up where the build recorded nothing.
func TestBuildVersions(t *testing.T) {
	info := &debug.BuildInfo{
		Main: debug.Module{Path: "github.com/locktest/locktest", Version: "v0.0.0-20261124210318-6eadce4aa12b+dirty"},
		Deps: []*debug.Module{
			{Path: "go.etcd.io/etcd/server/v3", Version: "v3.6.16"},
			{Path: "github.com/Shopify/toxiproxy/v2", Version: "v2.12.0", Replace: &debug.Module{Path: "example.com/toxiproxy", Version: "v2.12.1-fork"}},
			{Path: "github.com/anishathalye/porcupine", Version: "v1.3.1"},
		},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "6eadce4aa12b"}, {Key: "vcs.modified", Value: "true"}},
	}
	want := []Component{{"locktest", info.Main.Version}, {"commit", "6eadce4aa12b+dirty"}, {"go", runtime.Version()},
		{"etcd", "v3.6.16"}, {"toxiproxy", "v2.12.1-fork"}, {"porcupine", "v1.3.1"}}
	if got := buildVersions(info); !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	info.Settings = []debug.BuildSetting{{Key: "vcs.revision", Value: "6eadce4aa12b"}, {Key: "vcs.modified", Value: "false"}}
	if got := buildVersions(info)[1]; got.Version != "6eadce4aa12b" {
		t.Errorf("clean tree: commit %q", got.Version)
	}
	want = []Component{{"locktest", ""}, {"commit", ""}, {"go", runtime.Version()}, {"etcd", ""}, {"toxiproxy", ""}, {"porcupine", ""}}
	if got := buildVersions(nil); !slices.Equal(got, want) {
		t.Errorf("no build info: got %v, want %v", got, want)
	}
}
