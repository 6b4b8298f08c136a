package cluster

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/types"

	"github.com/locktest/locktest/backend/serverkit"
	"github.com/locktest/locktest/internal/partest"
	"github.com/locktest/locktest/internal/polltest"
)

// memberIDs lists the cluster's members as etcd's MemberList gives them.
func memberIDs(t *testing.T, ctx context.Context, c *Cluster) []uint64 {
	t.Helper()
	admin, err := c.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r, err := admin.MemberList(lctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for _, m := range r.Members {
		ids = append(ids, m.ID)
	}
	return ids
}

// removeTimed removes member i and logs how long etcd took to agree.
func removeTimed(t *testing.T, ctx context.Context, c *Cluster, i int) {
	t.Helper()
	start := time.Now()
	if err := c.RemoveMember(ctx, i); err != nil {
		t.Fatal(err)
	}
	t.Logf("removing %s took %v (etcd refuses changes until its members have been connected for 5 s)", c.members[i].Name, time.Since(start).Round(time.Millisecond))
}

// TestRemoveAndAddMember removes the leader, has the two left commit,
// adds it back with empty data and reads what they committed through it;
// then closes the cluster with a member removed and checks that nothing is
// left behind.
func TestRemoveAndAddMember(t *testing.T) {
	partest.Own(t, "TestOwnProcess")
	before := goroutines()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := Start(ctx, Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lead, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := c.members[lead]
	oldID := m.ID

	removeTimed(t, ctx, c, lead)
	if !c.Removed(lead) || c.Running(lead) || c.Paused(lead) {
		t.Fatalf("after RemoveMember: removed %v running %v paused %v", c.Removed(lead), c.Running(lead), c.Paused(lead))
	}
	if _, err := os.Stat(m.dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("data dir of the removed member: %v", err)
	}
	if ids := memberIDs(t, ctx, c); len(ids) != 2 || slices.Contains(ids, oldID) {
		t.Fatalf("member list %x still holds %x or is not of 2", ids, oldID)
	}
	nl, err := c.Leader(ctx)
	if err != nil || nl == lead {
		t.Fatalf("leader of the two left: %d, %v", nl, err)
	}
	admin, err := c.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	if err := putWithin(ctx, admin, 5*time.Second, "k", "committed by two"); err != nil {
		t.Fatalf("the two left cannot commit: %v", err)
	}
	if hs := checkConsistent(t, ctx, c); len(hs) != 2 {
		t.Fatalf("hashes of %d members, want the 2 in the cluster", len(hs))
	}
	if err := c.RemoveMember(ctx, lead); !errors.Is(err, ErrMemberRemoved) {
		t.Errorf("RemoveMember of a removed member: %v", err)
	}
	if err := c.RestartMember(ctx, lead); !errors.Is(err, ErrMemberRemoved) {
		t.Errorf("RestartMember of a removed member: %v", err)
	}
	if err := c.PauseMember(lead); !errors.Is(err, ErrMemberDown) {
		t.Errorf("PauseMember of a removed member: %v", err)
	}
	if err := c.HardStopMember(lead); err != nil {
		t.Errorf("HardStopMember of a removed member: %v", err)
	}

	start := time.Now()
	if err := c.AddMember(ctx, lead); err != nil {
		t.Fatal(err)
	}
	t.Logf("adding %s back (ready and caught up) took %v", m.Name, time.Since(start).Round(time.Millisecond))
	if c.Removed(lead) || !c.Running(lead) {
		t.Fatalf("after AddMember: removed %v running %v", c.Removed(lead), c.Running(lead))
	}
	if m.ID == oldID || m.ID != uint64(m.Etcd().Server.MemberID()) {
		t.Fatalf("ID %x after AddMember: old %x, server says %x", m.ID, oldID, m.Etcd().Server.MemberID())
	}
	if ids := memberIDs(t, ctx, c); len(ids) != 3 || !slices.Contains(ids, m.ID) {
		t.Fatalf("member list %x lacks the new member %x", ids, m.ID)
	}
	// Every member counts it as started (it has applied its publication):
	// else etcd refuses the next change as "not enough started members".
	for _, o := range c.members {
		if n := o.Etcd().Server.Cluster().Member(types.ID(m.ID)); n == nil || !n.IsStarted() {
			t.Fatalf("%s does not count the new member %x as started: %+v", o.Name, m.ID, n)
		}
	}
	// A linearizable read served by the new member alone.
	direct, err := c.DirectClient(lead)
	if err != nil {
		t.Fatal(err)
	}
	if v := get(ctx, t, direct, "k"); v != "committed by two" {
		t.Fatalf("the new member read %q", v)
	}
	// Clients' links to it work again.
	if err := putWithin(ctx, pinned(t, c, "p", lead), 5*time.Second, "k", "through its link"); err != nil {
		t.Fatal(err)
	}
	if hs := checkConsistent(t, ctx, c); len(hs) != 3 {
		t.Fatalf("hashes of %d members, want 3", len(hs))
	}

	// Close with a member removed.
	follower := (lead + 1) % 3
	removeTimed(t, ctx, c, follower)
	var addrs []string
	for _, m := range c.members {
		addrs = append(addrs, m.ClientAddr(), m.PeerAddr(), strings.TrimPrefix(m.peerListen, "http://"))
	}
	dataDir := c.Dir
	start = time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close with %s removed took %v", c.members[follower].Name, time.Since(start).Round(time.Millisecond))
	if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data dir %s: %v", dataDir, err)
	}
	checkRefused(t, addrs)
	waitGoroutines(t, before)
	if err := c.AddMember(ctx, follower); !errors.Is(err, serverkit.ErrClosed) {
		t.Errorf("AddMember after Close: %v", err)
	}
}

// TestRemoveRefusedWithoutQuorum checks that RemoveMember refuses, before
// asking etcd, whenever the others could not keep a quorum, and then
// replaces a member (removed and added back at once): the cluster stays
// healthy and consistent.
func TestRemoveRefusedWithoutQuorum(t *testing.T) {
	t.Parallel()
	c, ctx := startCluster(t, 3)
	refused := func(what string, i int, want string) {
		t.Helper()
		err := c.RemoveMember(ctx, i)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: RemoveMember(%d) = %v, want an error with %q", what, i, err, want)
		}
		if c.Removed(i) || !c.Running(i) {
			t.Fatalf("%s: the refused member is removed or down", what)
		}
	}
	if err := c.HardStopMember(0); err != nil {
		t.Fatal(err)
	}
	refused("another member down", 1, "would lose the quorum")
	if err := c.RestartMember(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.PauseMember(2); err != nil {
		t.Fatal(err)
	}
	refused("another member paused", 1, "would lose the quorum")
	refused("the member paused", 2, "is paused")
	if err := c.ResumeMember(2); err != nil {
		t.Fatal(err)
	}
	if err := c.SetCuts([][2]int{{0, 2}}); err != nil {
		t.Fatal(err)
	}
	refused("the others cut apart", 1, "would lose the quorum")
	if err := c.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := c.AddMember(ctx, 1); err == nil || !strings.Contains(err.Error(), "is in the cluster") {
		t.Fatalf("AddMember of a member in the cluster: %v", err)
	}

	// Replace m0, restarted a moment ago.
	removeTimed(t, ctx, c, 0)
	start := time.Now()
	if err := c.AddMember(ctx, 0); err != nil {
		t.Fatal(err)
	}
	t.Logf("adding m0 back took %v", time.Since(start).Round(time.Millisecond))
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	admin, err := c.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	if err := putWithin(ctx, admin, 5*time.Second, "after", "replace"); err != nil {
		t.Fatal(err)
	}
	checkConsistent(t, ctx, c)
}

// TestAddedMemberIsCut adds a member back while cuts isolate it: the cuts
// apply to the new member under its new ID, so it cannot catch up until
// they are mended.
func TestAddedMemberIsCut(t *testing.T) {
	t.Parallel()
	c, ctx := startCluster(t, 3)
	removeTimed(t, ctx, c, 2)
	if err := c.SetCuts([][2]int{{0, 2}, {1, 2}}); err != nil {
		t.Fatal(err)
	}
	// The addition is given a second from when the added member runs (a
	// member not cut off catches up in milliseconds), not from when it was
	// asked for: the steps before, the re-add's wait for the next second
	// (a new ID) included, took over a second on a loaded machine.
	actx, cancel := context.WithCancel(ctx)
	added := make(chan error, 1)
	go func() { added <- c.AddMember(actx, 2) }()
	var err error
	returned := false
	polltest.Until(t, 20*time.Second, "the added member to run", func() bool {
		select {
		case err = <-added:
			returned = true
		default:
		}
		return returned || !c.Removed(2) && c.Running(2)
	})
	if !returned {
		select {
		case err = <-added:
		case <-time.After(time.Second):
			cancel()
			err = <-added
		}
	}
	cancel()
	if err == nil {
		t.Fatal("a member cut off from every other caught up")
	}
	t.Logf("AddMember of a cut-off member: %v", err)
	if c.Removed(2) || !c.Running(2) {
		t.Fatalf("the added member: removed %v running %v", c.Removed(2), c.Running(2))
	}
	admin, err := c.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	if err := putWithin(ctx, admin, 5*time.Second, "k", "v"); err != nil {
		t.Fatal(err)
	}
	direct, err := c.DirectClient(2)
	if err != nil {
		t.Fatal(err)
	}
	healed := time.Now()
	if err := c.Heal(); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, 10*time.Second, "the added member serves once the cuts are mended", func() bool {
		gctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		r, err := direct.Get(gctx, "k")
		return err == nil && len(r.Kvs) == 1
	})
	t.Logf("the added member served %v after the cuts were mended", time.Since(healed).Round(time.Millisecond))
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	checkConsistent(t, ctx, c)

	// A member that joined keeps a raft "remote" of each member it found,
	// which a cut stops: crashed while cut, it must not stop it twice
	// (etcd 3.6 panicked, close of closed channel; see mendBeforeStop).
	if err := c.SetCuts([][2]int{{0, 2}}); err != nil {
		t.Fatal(err)
	}
	if err := c.HardStopMember(2); err != nil {
		t.Fatal(err)
	}
	if c.Running(2) {
		t.Fatal("the cut member still runs after HardStopMember")
	}
}
