package zookeeper_test

import (
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/backend/zookeeper"
	"github.com/locktest/locktest/backend/zookeeper/zkserver"
	"github.com/locktest/locktest/histories"
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

// zk-ghost-node: the holder's next create is applied by the servers and
// its reply lost. zk-unprotected creates again and leaves the first znode,
// never granted, owned by its live session, which stalls the queue until
// that session ends (liveness invalid); zk-lock finds its znode again by
// its protected name and leaves none behind (liveness valid). Each is what
// the scenario expects of its recipe: exit 0.
func TestGhostNode(t *testing.T) {
	t.Parallel()
	zkserver.ForTest(t)
	for _, c := range []struct {
		recipe string
		ghost  bool
	}{{"zk-unprotected", true}, {"zk-lock", false}} {
		t.Run(c.recipe, func(t *testing.T) {
			t.Parallel()
			out := t.TempDir()
			code, stdout, stderr := run(t, "scenario", "run", "zk-ghost-node", "--recipe", c.recipe, "--seed", "1", "--out", out)
			if code != 0 {
				t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			ops, err := histories.ReadFile(filepath.Join(runDir(out), "history.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			var struck string
			granted := map[string]bool{}
			for _, op := range ops {
				switch {
				case op.F == histories.FStop && op.Value.Fault == nemesis.LostReplyAcquire:
					if op.Value.Params["reply"] != "lost" {
						t.Errorf("the fault's stop: %v, want reply=lost", op.Value.Params)
					}
					struck = op.Value.Targets[0]
				case op.F == histories.Acquire && op.Type == histories.OK && op.Value != nil && op.Value.Token != nil:
					granted[strconv.FormatInt(*op.Value.Token, 10)] = true
				}
			}
			if struck == "" {
				t.Fatal("no lost-reply-acquire fault stopped")
			}
			// The ghost: a znode of the struck client the servers
			// created, never granted, deleted only when its session
			// ended.
			var ghosts []string
			for _, op := range ops {
				if op.F != histories.FKeyDeleted || len(op.Value.Targets) == 0 || op.Value.Targets[0] != struck {
					continue
				}
				p := op.Value.Params
				if p["by"] == histories.DeletedByRevoke && !granted[p["create_revision"]] {
					ghosts = append(ghosts, p["node"])
				}
			}
			if (len(ghosts) > 0) != c.ghost {
				t.Errorf("%s's znodes never granted and deleted only with its session: %v; want a ghost: %v", struck, ghosts, c.ghost)
			}
		})
	}
}
