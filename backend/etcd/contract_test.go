package etcd

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locktest/locktest/backend/etcd/etcdlock"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/resource"
)

// The correct mutex keeps its contract when a holder is paused past its
// lease: the next holder is granted only after the paused one's key is gone,
// and the overlap that follows is the lease race.
func TestContractMutexPausedHolder(t *testing.T) {
	t.Parallel()
	e := contending(t, etcdlock.MutexName)
	first := e.firstGrant()
	paused := nameOf(first.Process)
	// Record the fault as the nemesis would: promise 5 excuses an expiry
	// only under a fault the history shows.
	fault := &histories.Value{Fault: "pause-client", Targets: []string{paused}}
	e.rec.Record(histories.Op{Type: histories.Info, F: "start", Process: histories.Nemesis, Value: fault})
	// Paused until another client is granted the lock: the server may
	// expire the lease some time after its TTL (a new leader extends
	// every lease), and a waiter whose acquire gave up meanwhile queues
	// again.
	if err := e.wl.Pause(paused, 5*time.Second, true); err != nil {
		t.Fatal(err)
	}
	e.waitPaused(paused)
	ops, _ := e.rec.Snapshot()
	e.pausedUntil(paused, len(ops), "another client's grant", func(op histories.Op) bool {
		return op.Type == histories.OK && op.F == histories.Acquire && op.Process != first.Process
	})
	e.waitOverlap(15 * time.Second)
	e.rec.Record(histories.Op{Type: histories.Info, F: "stop", Process: histories.Nemesis, Value: fault})
	_, ops = e.finish()
	t.Logf("%d leaders elected", elections(filepath.Dir(e.path)))
	r := results(ops)["contract"]
	if r.Verdict != checker.Valid {
		t.Fatalf("contract %s, want valid:\n%s", r.Verdict, r.Explanation)
	}
	if r.LeaseRaces == 0 || r.LockBugs != 0 {
		t.Errorf("%d lease races, %d bugs; want some races and no bug", r.LeaseRaces, r.LockBugs)
	}
}

// grantLost is a lock broken on purpose, for this test: it creates its key
// under its session's lease, revokes that lease (the key goes with it),
// reads the key's absence and grants the lock all the same: a grant decided
// on a state without the grantee's claim, as etcd#11456's waiter was.
type grantLost struct{ env lock.Env }

func (g *grantLost) Close() error { return nil }

func (g *grantLost) Acquire(ctx context.Context, name string) (lock.Held, error) {
	cli := g.env.Conn.(*clientv3.Client)
	lease, err := cli.Grant(ctx, int64(g.env.TTL))
	if err != nil {
		return nil, err
	}
	key := g.env.Prefix + name + "/" + fmt.Sprintf("%x", lease.ID)
	put, err := cli.Put(ctx, key, g.env.Name, clientv3.WithLease(lease.ID))
	if err != nil {
		return nil, err
	}
	if _, err := cli.Revoke(ctx, lease.ID); err != nil {
		return nil, err
	}
	if _, err := cli.Get(ctx, key); err != nil {
		return nil, err
	}
	return &grantLostHeld{key: key, lease: lease.ID, token: put.Header.Revision}, nil
}

type grantLostHeld struct {
	key   string
	lease clientv3.LeaseID
	token int64
}

func (h *grantLostHeld) Token() int64                      { return h.token }
func (h *grantLostHeld) Release(ctx context.Context) error { return nil }
func (h *grantLostHeld) Key() string                       { return h.key }
func (h *grantLostHeld) LeaseID() clientv3.LeaseID         { return h.lease }

func TestContractGrantOfLostLockCaught(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Clients = 1
	cfg.Recipe = lock.RecipeFunc("grant-lost", func(_ context.Context, env lock.Env) (lock.Locker, error) {
		return &grantLost{env}, nil
	})
	e := setup(t, resource.Fenced, cfg)
	e.start()
	e.waitReleases(3)
	_, ops := e.finish()
	expectBroken(t, results(ops)["contract"], "promise 2")
}

// decidedEarlier is a lock that decides on a state where its key exists and
// reads a later state before it returns, as lock-rpc looks up its token
// after the server granted it: it grants at its key's creation, revokes the
// lease (the key goes), reads again and says it decided at the creation.
type decidedEarlier struct{ grantLost }

func (d *decidedEarlier) Acquire(ctx context.Context, name string) (lock.Held, error) {
	h, err := d.grantLost.Acquire(ctx, name)
	if err != nil {
		return nil, err
	}
	g := h.(*grantLostHeld)
	return &decidedEarlierHeld{*g}, nil
}

type decidedEarlierHeld struct{ grantLostHeld }

func (h *decidedEarlierHeld) Revision() int64 { return h.token }

// A lock's own word on the state it decided on (lock.Decided) is that
// state: a read it makes after deciding, of a state where its key is gone,
// does not make the grant one of a lost lock (a lock-rpc grant whose reply
// came late was told as promise 2 in a sweep of --nemesis all, seed 19).
func TestDecidedRevisionIsTheLocksWord(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Clients = 1
	cfg.Recipe = lock.RecipeFunc("decided-earlier", func(_ context.Context, env lock.Env) (lock.Locker, error) {
		return &decidedEarlier{grantLost{env}}, nil
	})
	e := setup(t, resource.Fenced, cfg)
	e.start()
	e.waitReleases(3)
	_, ops := e.finish()
	grants := 0
	for _, op := range ops {
		if op.F == "acquire" && op.Type == histories.OK {
			grants++
			tok, _ := op.Token()
			if rev, _ := op.Revision(); rev != tok {
				t.Errorf("grant of token %d recorded at revision %d, want the lock's word %d", tok, rev, tok)
			}
		}
	}
	if grants == 0 {
		t.Fatal("no grant recorded")
	}
	for _, v := range results(ops)["contract"].Violations {
		if v.Kind == "promise 2" {
			t.Errorf("promise 2 told of a grant decided while its key existed: %s", v.Story)
		}
	}
}

// The observer's "other-release" is definite: only a deletion that leaves
// the owner's lease alive, while the owner is not releasing and another
// client is releasing an older grant of the same key.
func TestOtherReleaseDefinite(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	for _, c := range []struct {
		name     string
		intents  map[keyRev]release
		alive    *bool
		want     string
		releaser string
	}{
		{"own release", map[keyRev]release{{"k", 5}: {client: "c1"}}, &yes, "release", ""},
		{"other client's release", map[keyRev]release{{"k", 3}: {client: "c2"}}, &yes, "other-release", "c2"},
		{"owner releasing under another token", map[keyRev]release{{"k", 3}: {client: "c2"}, {"k", 6}: {client: "c1"}}, &yes, "release", ""},
		{"lease gone: expiry", map[keyRev]release{{"k", 3}: {client: "c2"}}, &no, "expiry", ""},
		{"lease unknown: not definite", map[keyRev]release{{"k", 3}: {client: "c2"}}, nil, "expiry", ""},
		{"newer grant's release", map[keyRev]release{{"k", 7}: {client: "c2"}}, &yes, "acquire", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := ownedBy("c1")
			w.releases = c.intents
			d := w.deleted("k", 5, 9, 1, c.alive)
			if d.by != c.want || d.releaser != c.releaser || d.owner.client != "c1" {
				t.Errorf("deletion %+v, want by %s, releaser %q", d, c.want, c.releaser)
			}
		})
	}
}

// A release's intent outlives its return until the observer has seen past
// it, so a deletion the observer reads late is still the release's; a
// release that deleted nothing leaves no intent behind.
func TestReleaseIntentOutlivesRelease(t *testing.T) {
	t.Parallel()
	yes := true
	w := ownedBy("c1")
	w.intendRelease("k", 3, "c2") // c2 deletes c1's key (created at 5) at revision 9
	w.releaseDone("k", 3, 9, 0, "c2")
	w.observedUpTo(8)
	if d := w.deleted("k", 5, 9, 1, &yes); d.by != "other-release" || d.releaser != "c2" {
		t.Errorf("deletion seen after the release returned: %+v, want other-release by c2", d)
	}
	w.intendRelease("k", 4, "c2") // found the key gone
	w.releaseDone("k", 4, 12, 0, "c2")
	w.observedUpTo(12)
	if d := w.deleted("k", 5, 13, 1, &yes); d.by != "acquire" {
		t.Errorf("deletion after a release that deleted nothing: %+v, want no release", d)
	}
}

// A release's own delete response settles who deleted a key, even while
// the key's owner was releasing too and the owner's lease was never asked.
func TestReleaseOwnDeleteIsDefinite(t *testing.T) {
	t.Parallel()
	w := ownedBy("c1")
	w.intendRelease("k", 5, "c1") // the owner releases its grant...
	w.intendRelease("k", 3, "c2") // ...while c2's late release deletes it first
	w.releaseDone("k", 3, 9, 9, "c2")
	w.releaseDone("k", 5, 9, 0, "c1")
	if d := w.deleted("k", 5, 9, 1, nil); d.by != "other-release" || d.releaser != "c2" || d.released != 3 {
		t.Errorf("deletion %+v, want other-release by c2's release of token 3", d)
	}
	w.intendRelease("k", 7, "c1")
	w.releaseDone("k", 7, 11, 11, "c1")
	if d := w.deleted("k", 7, 11, 1, nil); d.by != "release" {
		t.Errorf("deletion %+v, want the owner's own release", d)
	}
}

// ownedBy is the bookkeeping of one lease, 1, of client's process 1.
func ownedBy(client string) *deletions {
	w := newDeletions()
	w.owners[1] = leaseOwner{client, 1}
	return w
}

// A release whose reply was lost may be retried (etcd#22082): when the
// owner's next grant of the same key is deleted while its lease lives and
// no release of it is under way, that retry deleted it, definitely. Without
// the release of unknown outcome, or for a key that was no grant (a
// waiter's, which Mutex.Lock deletes itself after a failed wait), it stays
// the owner's clean-up.
func TestStaleRetryDeletesNextGrant(t *testing.T) {
	t.Parallel()
	yes := true
	w := ownedBy("c1")
	w.granted("k", 5, "c1")
	w.intendRelease("k", 5, "c1")
	w.releaseDone("k", 5, 0, 0, "c1") // its reply was lost
	if d := w.deleted("k", 5, 6, 1, &yes); d.by != "release" {
		t.Fatalf("the first delete: %+v, want the release", d)
	}
	w.granted("k", 8, "c1") // the same session locks again: the same key
	if d := w.deleted("k", 8, 9, 1, &yes); d.by != "other-release" || d.releaser != "c1" || d.released != 5 {
		t.Errorf("the next grant's key deleted: %+v, want other-release by c1's release of token 5", d)
	}
	if d := w.deleted("k", 10, 11, 1, &yes); d.by != "acquire" {
		t.Errorf("a key that was no grant: %+v, want the owner's clean-up", d)
	}
	settled := ownedBy("c1")
	settled.granted("k", 5, "c1")
	settled.intendRelease("k", 5, "c1")
	settled.releaseDone("k", 5, 6, 6, "c1")
	settled.granted("k", 8, "c1")
	if d := settled.deleted("k", 8, 9, 1, &yes); d.by != "acquire" {
		t.Errorf("after a release that returned: %+v, want no release blamed", d)
	}
}

// fakeWatcher hands out one channel the test feeds.
type fakeWatcher struct {
	clientv3.Watcher
	ch chan clientv3.WatchResponse
}

func (f fakeWatcher) Watch(context.Context, string, ...clientv3.OpOption) clientv3.WatchChan {
	return f.ch
}

// A watch response counts as read only while the watch lives: what arrives
// after the consumer cancelled it was never read.
func TestRevisionsWatchReadOnly(t *testing.T) {
	t.Parallel()
	revs := &revisions{}
	fw := fakeWatcher{ch: make(chan clientv3.WatchResponse, 2)}
	ctx, cancel := context.WithCancel(context.Background())
	out := trackedWatcher{fw, revs}.Watch(ctx, "k")
	var first clientv3.WatchResponse
	first.Header.Revision = 7
	fw.ch <- first
	if got := <-out; got.Header.Revision != 7 || revs.newest() != 7 {
		t.Fatalf("got revision %d, newest %d; want 7, 7", got.Header.Revision, revs.newest())
	}
	cancel()
	var later clientv3.WatchResponse
	later.Header.Revision = 9
	fw.ch <- later
	close(fw.ch)
	for range out { // closed once the forwarder has drained the real watch
	}
	if revs.newest() != 7 {
		t.Errorf("newest %d after a response that came after the cancel; want 7", revs.newest())
	}
	revs.reset()
	if revs.newest() != 0 {
		t.Errorf("newest %d after reset", revs.newest())
	}
}
