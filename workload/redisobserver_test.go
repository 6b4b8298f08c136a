package workload

import (
	"testing"

	"github.com/locktest/locktest/histories"
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
	g.released("lock", a)
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
}
