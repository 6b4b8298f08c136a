package redis

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/locktest/locktest/backend/redis/redisserver"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/recordtest"
	"github.com/locktest/locktest/workload"
)

// A deletion's event may reach the observer after the next grant's reply
// reached its client: it is still the earlier key's, and a late release
// that deletes the next holder's key is still another's.
func TestGrantValuesLateEvents(t *testing.T) {
	grant := func(g *grantValues, client, value string, token int64) valueGrant {
		return g.granted("lock", valueGrant{value: value, client: client, token: token})
	}
	check := func(what string, d valueDeletion, owner int64, by string) {
		t.Helper()
		if d.owner.token != owner || d.by != by {
			t.Errorf("%s: owner token %d, by %q; want %d, %q", what, d.owner.token, d.by, owner, by)
		}
	}

	// c0 releases; c1 is granted before the observer sees c0's "del".
	g := newGrantValues()
	a := grant(g, "c0", "a", 1)
	g.release("lock", a)
	g.released("lock", a, nil)
	b := grant(g, "c1", "b", 2)
	check("a release's late event", g.deleted("lock"), 1, histories.DeletedByRelease)
	g.release("lock", b)
	check("the next release", g.deleted("lock"), 2, histories.DeletedByRelease)

	// c0's key expires while it is paused; c1 is granted before the
	// observer sees the expiry; c0 wakes and DELs c1's key.
	g = newGrantValues()
	a = grant(g, "c0", "a", 1)
	grant(g, "c1", "b", 2)
	check("a late expiry", g.expired("lock"), 1, histories.DeletedByExpiry)
	g.release("lock", a)
	check("a late DEL of the next key", g.deleted("lock"), 2, histories.DeletedByOther)

	// Two hand-offs before the first release's event arrives.
	g = newGrantValues()
	a = grant(g, "c0", "a", 1)
	g.release("lock", a)
	b = grant(g, "c1", "b", 2)
	g.release("lock", b)
	grant(g, "c2", "c", 3)
	d := g.deleted("lock")
	if d.by == histories.DeletedByOther {
		t.Errorf("own releases with late events told as another's: %+v", d)
	}

	// Attribution by order slipped by one grant (a's deletion was never
	// seen, so b's expiry was put on a); c4, granted next, releases while
	// c2's release of a key long gone is still under way. The deletion is
	// c4's own or, by name, c2's: not definitely another's (a redis-py
	// sweep's false promise 4, whose release compares its value).
	g = newGrantValues()
	old := grant(g, "c2", "p", 0)
	g.deleted("lock")
	grant(g, "c1", "a", 0)
	grant(g, "c1", "b", 0)
	g.expired("lock")
	c := grant(g, "c4", "c", 0)
	g.release("lock", old)
	g.release("lock", c)
	if d := g.deleted("lock"); d.by == histories.DeletedByOther {
		t.Errorf("a release that may be the owner's own told as another's: %+v", d)
	}
}

// On Redlock's independent masters each master reports the deletion of
// the key it held. The observer attributes it to the grant located on that
// master (its value read there at the grant), records one key-deleted
// event per grant and cause, and records nothing for a key no grant was
// located on (an acquisition that got too few masters).
func TestRedlockObserverAttribution(t *testing.T) {
	on := map[string][]serverProcess{}    // where locate finds each grant's value
	pid := []int{100, 101, 102, 103, 104} // each master's process
	o := &observer{values: newGrantValues(), servers: []string{"r0", "r1", "r2", "r3", "r4"}, recorded: map[string]bool{}}
	o.values.setLocate(func(key, value string) []serverProcess { return on[value] })
	grant := func(client, value string, token int64, servers ...int) valueGrant {
		on[value] = nil
		for _, i := range servers {
			on[value] = append(on[value], serverProcess{i, pid[i]})
		}
		return o.values.granted("p/lock", valueGrant{value: value, client: client, process: histories.Process(token), token: token})
	}
	events := func(op string, servers ...int) []map[string]string {
		var ps []map[string]string
		for _, i := range servers {
			d, ok := o.values.deletedOn("p/lock", serverProcess{i, pid[i]}, op == "expired")
			if !ok {
				continue
			}
			if rec, ok := o.deletionOf(d, redisserver.Event{Server: i, Key: "p/lock", Op: op}, "lock"); ok {
				ps = append(ps, rec.Value.Params)
			}
		}
		return ps
	}
	want := func(what string, got []map[string]string, want ...map[string]string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d key-deleted events %v, want %d", what, len(got), got, len(want))
		}
		for j, w := range want {
			for k, v := range w {
				if got[j][k] != v {
					t.Errorf("%s: event %d: %s = %q, want %q (all: %v)", what, j, k, got[j][k], v, got[j])
				}
			}
		}
	}

	// c0 holds all five masters and releases, but r4 is paused and misses
	// the release: four "del"s, one release.
	a := grant("c0", "a", 1, 0, 1, 2, 3, 4)
	o.values.release("p/lock", a)
	want("a release on four masters", events("del", 0, 1, 2, 3),
		map[string]string{"by": histories.DeletedByRelease, "create_revision": "1", "server": "r0"})
	o.values.released("p/lock", a, nil)

	// c1 is granted on r0-r2 (r3 paused, r4 still holds c0's key). r4
	// resumes and expires c0's key: c0's, not c1's, though c1's is newest.
	grant("c1", "b", 2, 0, 1, 2)
	want("a stale key expiring on a resumed master", events("expired", 4),
		map[string]string{"by": histories.DeletedByExpiry, "create_revision": "1", "server": "r4"})

	// An acquisition that got r3 and r4 only deletes its keys there: no
	// grant's key, nothing recorded.
	want("an acquisition's clean-up", events("del", 3, 4))

	// c1's key expires early on r2 (a clock jump), then on r0 and r1: one
	// expiry of c1's key, recorded at the first.
	want("c1's key expiring master by master", events("expired", 2, 0, 1),
		map[string]string{"by": histories.DeletedByExpiry, "create_revision": "2", "server": "r2"})

	// c2 is granted on r0-r2; r2 crashes and restarts empty, and an
	// acquisition's clean-up there deletes its own key, not c2's.
	grant("c2", "c", 3, 0, 1, 2)
	pid[2] = 200
	want("a clean-up on a restarted master", events("del", 2))

	// A "del" of c2's key outside its release has no cause said.
	if ps := events("del", 1); len(ps) != 1 || ps[0]["by"] != "" || ps[0]["create_revision"] != "3" {
		t.Errorf("a del of c2's key outside its release: %v, want one of token 3 with no cause", ps)
	}
}

// On a real server: a release that returned ok while the server still
// holds its grant's value is recorded key-kept (promise 6's evidence); one
// that deleted its key, or one that did not return ok, is not.
func TestObserverKeyKept(t *testing.T) {
	bin := redisserver.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := redisserver.Start(ctx, redisserver.Config{Binary: bin, Topology: redisserver.Single, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	values, rec := newGrantValues(), recordtest.Create(t)
	kept := func() []histories.Op {
		ops, _ := rec.Snapshot()
		return slices.DeleteFunc(ops, func(op histories.Op) bool { return op.F != histories.FKeyKept })
	}
	o, err := startObserver(ctx, d, values, workload.Keys{Prefix: "p/", Locks: []string{"lock"}}, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	srv := d.Servers()[0].Client()
	grant := func(value string, token int64) valueGrant {
		t.Helper()
		if err := srv.Set(ctx, "p/lock", value, 0).Err(); err != nil {
			t.Fatal(err)
		}
		return values.granted("p/lock", valueGrant{value: value, client: "c1", process: histories.Process(token), token: token})
	}

	a := grant("a", 1)
	values.release("p/lock", a)
	values.released("p/lock", a, errors.New("EOF")) // outcome unknown: nothing to judge
	if got := kept(); len(got) != 0 {
		t.Fatalf("a release that did not return ok recorded %v", got)
	}
	values.released("p/lock", a, nil) // ok, and the key is still a's
	got := kept()
	if len(got) != 1 || got[0].Key != "lock" || got[0].Value.Params["process"] != "1" || !slices.Equal(got[0].Value.Targets, []string{"c1"}) {
		t.Fatalf("key-kept events %+v, want one of process 1 (c1) on lock", got)
	}

	if err := srv.Del(ctx, "p/lock").Err(); err != nil {
		t.Fatal(err)
	}
	b := grant("b", 2)
	values.release("p/lock", b)
	if err := srv.Del(ctx, "p/lock").Err(); err != nil {
		t.Fatal(err)
	}
	values.released("p/lock", b, nil) // ok, and it took effect
	if got := kept(); len(got) != 1 {
		t.Fatalf("a release that deleted its key recorded key-kept: %+v", got[1:])
	}
}
