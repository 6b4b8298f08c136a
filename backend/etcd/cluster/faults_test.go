package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/internal/polltest"
)

func startCluster(t *testing.T, members int) (*Cluster, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	dir := t.TempDir()
	c, err := Start(ctx, Config{Members: members, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	// Runs after Close (cleanups run last first), before dir is removed:
	// a failure is traced from the members' own account of it.
	t.Cleanup(func() {
		if t.Failed() {
			logTails(t, dir, 150)
		}
	})
	t.Cleanup(func() {
		start := time.Now()
		if err := c.Close(); err != nil {
			t.Error(err)
		}
		// A Close that lets members hand leadership on waits ~5 s for
		// three members (stopMembers); a right one takes well under 1 s,
		// and a loaded machine (load 47) stretched one to 2.7 s.
		if d := time.Since(start); d > 4*time.Second {
			t.Errorf("Close took %v", d)
		} else {
			t.Logf("Close took %v", d.Round(time.Millisecond))
		}
	})
	return c, ctx
}

// logTails logs the last n lines of each member's log and toxiproxy's in
// dir.
func logTails(t *testing.T, dir string, n int) {
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			t.Log(err)
			continue
		}
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		lines = lines[max(0, len(lines)-n):]
		t.Logf("last %d lines of %s:\n%s", len(lines), filepath.Base(l), strings.Join(lines, "\n"))
	}
}

// pinned dials one proxied endpoint of client name: member i only.
func pinned(t *testing.T, c *Cluster, name string, i int) *clientv3.Client {
	t.Helper()
	eps, err := c.Endpoints(name)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := dial(&c.Base, clientv3.Config{Endpoints: eps[i : i+1], DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// leaderOf waits until every member in ms names the same leader other than
// not and returns its index.
func leaderOf(t *testing.T, c *Cluster, ms []int, not int, timeout time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var lead uint64
		agree := true
		for _, i := range ms {
			l := uint64(c.members[i].Etcd().Server.Leader())
			if l == 0 || lead != 0 && l != lead {
				agree = false
			}
			lead = l
		}
		if agree {
			for _, m := range c.members {
				if m.ID == lead && m.Index != not {
					return m.Index
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("members %v did not agree on a leader within %v", ms, timeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func putWithin(ctx context.Context, cl *clientv3.Client, d time.Duration, k, v string) error {
	pctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	_, err := cl.Put(pctx, k, v)
	return err
}

// commitWithin puts k=v through cl until a put commits, for at most d,
// each try for at most putTry. etcd does not propose again a proposal lost
// in a change of leader (forwarded by a member that has just learned its
// leader, or to a leader that stepped down before replicating it) and
// answers it only after its request timeout (5 s), so a single put of 5 s
// failed as one through a member that cannot commit would. The one failure
// seen (at load 55-68: "put after resume: context deadline exceeded")
// took those whole 5 s; with 100 ms election timeouts, a loaded machine
// delays leaders' heartbeats ("leader failed to send out heartbeat on
// time", hundreds of times in 24 runs at load 30). Putting again what
// committed is harmless.
func commitWithin(t *testing.T, ctx context.Context, cl *clientv3.Client, d time.Duration, k, v string) error {
	t.Helper()
	deadline := time.Now().Add(d)
	for try := 1; ; try++ {
		err := putWithin(ctx, cl, min(putTry, time.Until(deadline)), k, v)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		t.Logf("put %s=%s, try %d: %v", k, v, try, err)
	}
}

// putTry bounds one try of commitWithin: a put took at most 1.3 s at load
// 35 (60 runs of TestPauseMember, the put after the resume).
const putTry = 3 * time.Second

func checkConsistent(t *testing.T, ctx context.Context, c *Cluster) []checker.MemberHash {
	t.Helper()
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	hs, err := c.Hashes(hctx)
	if err != nil {
		t.Fatal(err)
	}
	if checker.Consistency(hs).Verdict != checker.Valid {
		t.Fatalf("members disagree: %+v", hs)
	}
	return hs
}

// TestPartitionLeader isolates the leader: the majority elects a new leader
// and commits, the old leader cannot commit, and Heal brings everything back.
func TestPartitionLeader(t *testing.T) {
	t.Parallel()
	c, ctx := startCluster(t, 3)
	leadIndex, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lead := c.Members()[leadIndex]
	var rest []int
	for i := range 3 {
		if i != lead.Index {
			rest = append(rest, i)
		}
	}
	old := pinned(t, c, "old", lead.Index)
	maj := pinned(t, c, "maj", rest[0])
	if err := putWithin(ctx, old, 2*time.Second, "k", "0"); err != nil {
		t.Fatal(err)
	}

	cut := time.Now()
	if err := c.Partition([][]int{{lead.Index}, rest}); err != nil {
		t.Fatal(err)
	}
	if got := c.Cuts(); len(got) != 2 {
		t.Fatalf("cuts %v, want 2 pairs", got)
	}
	nl := leaderOf(t, c, rest, lead.Index, 5*time.Second)
	t.Logf("new leader %s %v after the cut", c.members[nl].Name, time.Since(cut).Round(time.Millisecond))
	if nl == lead.Index {
		t.Fatalf("isolated leader %s still leads the majority", lead.Name)
	}
	if err := putWithin(ctx, maj, 2*time.Second, "k", "maj"); err != nil {
		t.Fatalf("majority cannot commit: %v", err)
	}
	start := time.Now()
	if err := putWithin(ctx, old, time.Second, "k", "minority"); err == nil {
		t.Fatal("isolated old leader committed a put")
	} else {
		t.Logf("put on the isolated member failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
	}

	if err := c.Heal(); err != nil {
		t.Fatal(err)
	}
	if got := c.Cuts(); len(got) != 0 {
		t.Fatalf("cuts after Heal: %v", got)
	}
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	if err := putWithin(ctx, old, 5*time.Second, "k", "healed"); err != nil {
		t.Fatalf("put through the healed member: %v", err)
	}
	checkConsistent(t, ctx, c)
}

// TestCrashRestart hard-stops the leader and a follower in turn, writes
// while each is down, restarts it from its data directory and checks it
// caught up.
func TestCrashRestart(t *testing.T) {
	t.Parallel()
	c, ctx := startCluster(t, 3)
	admin, err := c.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	leadIndex, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lead := c.Members()[leadIndex]
	follower := (lead.Index + 1) % 3
	for round, victim := range []int{lead.Index, follower} {
		start := time.Now()
		if err := c.HardStopMember(victim); err != nil {
			t.Fatal(err)
		}
		t.Logf("hard stop of %s took %v", c.members[victim].Name, time.Since(start).Round(time.Millisecond))
		if c.Running(victim) {
			t.Fatal("member still running after HardStopMember")
		}
		if err := c.HardStopMember(victim); err != nil {
			t.Fatalf("second HardStopMember: %v", err)
		}
		start = time.Now()
		if _, err := c.Leader(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("leader among the rest after %v", time.Since(start).Round(time.Millisecond))
		for i := range 50 {
			if err := putWithin(ctx, admin, 5*time.Second, fmt.Sprintf("k%d-%d", round, i), "v"); err != nil {
				t.Fatal(err)
			}
		}
		start = time.Now()
		if err := c.RestartMember(ctx, victim); err != nil {
			t.Fatal(err)
		}
		t.Logf("restart of %s (ready and caught up) took %v", c.members[victim].Name, time.Since(start).Round(time.Millisecond))
		if !c.Running(victim) {
			t.Fatal("member not running after RestartMember")
		}
		if _, err := c.Leader(ctx); err != nil {
			t.Fatal(err)
		}
		hs := checkConsistent(t, ctx, c)
		t.Logf("hashes: %+v", hs)
	}
	// The restarted member serves through its proxies again.
	if err := putWithin(ctx, pinned(t, c, "p", follower), 5*time.Second, "after", "v"); err != nil {
		t.Fatal(err)
	}
}

// TestPauseMember pauses a member: a client pinned to it through its proxy
// cannot commit, the others can; after ResumeMember it can again.
func TestPauseMember(t *testing.T) {
	t.Parallel()
	c, ctx := startCluster(t, 3)
	leadIndex, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lead := c.Members()[leadIndex]
	victim := lead.Index
	other := (victim + 1) % 3
	pc := pinned(t, c, "p", victim)
	oc := pinned(t, c, "o", other)
	if err := putWithin(ctx, pc, 2*time.Second, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := c.PauseMember(victim); err != nil {
		t.Fatal(err)
	}
	if !c.Paused(victim) {
		t.Fatal("not paused")
	}
	if err := putWithin(ctx, pc, 500*time.Millisecond, "k", "paused"); err == nil {
		t.Fatal("put through a paused member succeeded")
	}
	// The rest commit once they have elected a leader of their own: a put
	// sent while they still followed the paused leader is forwarded to it
	// and lost, and etcd answers it only after its request timeout (5 s).
	// On a loaded machine the election can take that long to come.
	polltest.Until(t, 10*time.Second, "the other members to elect a leader but the paused one", func() bool {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		st, err := oc.Status(sctx, oc.Endpoints()[0])
		return err == nil && st.Leader != 0 && st.Leader != lead.ID
	})
	if err := commitWithin(t, ctx, oc, 10*time.Second, "k", "other"); err != nil {
		t.Fatalf("rest of the cluster cannot commit while a member is paused: %v", err)
	}
	if err := c.ResumeMember(victim); err != nil {
		t.Fatal(err)
	}
	if err := commitWithin(t, ctx, pc, 10*time.Second, "k", "resumed"); err != nil {
		t.Fatalf("put after resume: %v", err)
	}
	checkConsistent(t, ctx, c)
	// Leave a member paused and another hard-stopped for Close (checked in
	// the cleanup to be fast).
	if err := c.PauseMember(victim); err != nil {
		t.Fatal(err)
	}
	if err := c.HardStopMember(other); err != nil {
		t.Fatal(err)
	}
}

// TestPauseOutlastsAMend: a member cut off, paused, then mended stays
// paused: it receives nothing until it resumes. MendPeer resumes the
// member's sending and reading toward the peer, which undid the pause
// (the member caught up with the leader's writes while paused).
func TestPauseOutlastsAMend(t *testing.T) {
	t.Parallel()
	c, ctx := startCluster(t, 3)
	lead, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	victim := (lead + 1) % 3
	if err := c.Partition([][]int{{victim}, {lead, 3 - lead - victim}}); err != nil {
		t.Fatal(err)
	}
	if err := c.PauseMember(victim); err != nil {
		t.Fatal(err)
	}
	if err := c.Heal(); err != nil {
		t.Fatal(err)
	}
	lc := pinned(t, c, "l", lead)
	defer lc.Close()
	var last int64
	for i := range 3 {
		resp, err := lc.Put(ctx, "k", fmt.Sprint(i))
		if err != nil {
			t.Fatal(err)
		}
		last = resp.Header.Revision
	}
	srv := c.Members()[victim].Etcd().Server
	// Ten heartbeats (100 ms) of the leader: a member that hears them
	// catches up in one.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if rev := srv.KV().Rev(); rev >= last {
			t.Fatalf("the paused member caught up (revision %d of %d) after its cut was mended", rev, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.ResumeMember(victim); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, 10*time.Second, "the resumed member to catch up", func() bool { return srv.KV().Rev() >= last })
	checkConsistent(t, ctx, c)
}

// TestFiveMemberCuts cuts a majorities ring in a 5-member cluster: every
// member still sees a majority, so the cluster keeps committing.
func TestFiveMemberCuts(t *testing.T) {
	t.Parallel()
	c, ctx := startCluster(t, 5)
	var pairs [][2]int
	for i := range 5 {
		pairs = append(pairs, [2]int{i, (i + 2) % 5})
	}
	if err := c.SetCuts(pairs); err != nil {
		t.Fatal(err)
	}
	if len(c.Cuts()) != 5 {
		t.Fatalf("cuts %v", c.Cuts())
	}
	// A member that cannot reach the leader forwards proposals into the
	// void (they time out after ~5 s), so write through a self-declared
	// leader: a majority still sees it.
	var lead int
	polltest.Until(t, 5*time.Second, "a leader", func() bool {
		for _, m := range c.members {
			if uint64(m.Etcd().Server.Leader()) == m.ID {
				lead = m.Index
				return true
			}
		}
		return false
	})
	lc, err := c.DirectClient(lead)
	if err != nil {
		t.Fatal(err)
	}
	if err := putWithin(ctx, lc, 5*time.Second, "ring", "v"); err != nil {
		t.Fatalf("put in a majorities ring: %v", err)
	}
	admin, err := c.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Partition([][]int{{0, 1}, {2}, {3, 4}}); err != nil {
		t.Fatal(err)
	}
	if len(c.Cuts()) != 8 {
		t.Fatalf("cuts %v", c.Cuts())
	}
	if err := c.Heal(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	if err := putWithin(ctx, admin, 5*time.Second, "healed", "v"); err != nil {
		t.Fatal(err)
	}
	checkConsistent(t, ctx, c)
}
