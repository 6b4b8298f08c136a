package zookeeper_test

import (
	"slices"
	"testing"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/backend/zookeeper"
	"github.com/locktest/locktest/nemesis"
)

// --nemesis all on ZooKeeper is every family it carries out, lost replies
// too: its client links are behind toxiproxy.
func TestNemesisAll(t *testing.T) {
	o := &zookeeper.Options{}
	p := backend.Plan{Recipe: "zk-lock", Families: []string{nemesis.All}}
	want := []string{"partition", "isolate", "clock", "pause", "crash", "slow", "lost-reply"}
	if all := nemesis.Expand(p.Families, nemesis.Offered(o.Prototype(p))); !slices.Equal(all, want) {
		t.Errorf("--nemesis all on ZooKeeper is %v, want %v", all, want)
	}
}
