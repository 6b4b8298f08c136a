package etcd

import (
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locktest/locktest/histories"
)

// deletions is who deleted a lock key, as the observer tells it: the
// clients' connections note whose each lease is, which releases and
// revokes are under way and what each release's own delete removed; the
// observer, which watches the keys from outside the clients' links, asks
// deleted for each deletion it sees.
type deletions struct {
	mu       sync.Mutex
	owners   map[clientv3.LeaseID]leaseOwner
	releases map[keyRev]release // lock keys their owner is deleting in a release
	revoking map[clientv3.LeaseID]bool
}

func newDeletions() *deletions {
	return &deletions{owners: map[clientv3.LeaseID]leaseOwner{}, releases: map[keyRev]release{}, revoking: map[clientv3.LeaseID]bool{}}
}

// keyRev is one incarnation of an etcd key.
type keyRev struct {
	key string
	rev int64
}

type leaseOwner struct {
	client  string
	process histories.Process
}

// registerLease notes which client process owns lease, for the observer.
func (d *deletions) registerLease(id clientv3.LeaseID, client string, p histories.Process) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.owners[id] = leaseOwner{client, p}
}

// release is a client's intent to delete its lock key. It is kept until the
// observer has seen the deletion, or has seen past the revision the release
// ended at (until; 0 while unknown) without one: the release found its key
// gone. Dropping it any sooner would let the observer, which runs behind,
// misread the deletion it did make. deletedAt is the revision at which the
// release's own delete removed a key, by its response (0: none, or not
// known): that attributes the deletion at that revision definitely.
type release struct {
	client    string
	until     int64
	deletedAt int64
	done      bool
}

// intendRelease notes that client, the owner of etcd key created at
// revision rev (its fencing token), is about to delete it in a release.
func (d *deletions) intendRelease(key string, rev int64, client string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.releases[keyRev{key, rev}] = release{client: client}
}

// releaseDone notes that the release of key at rev returned, having read
// the store up to revision until (its deletion, if it made one, is at or
// before until; 0 if it failed) and having deleted a key at deletedAt.
func (d *deletions) releaseDone(key string, rev, until, deletedAt int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r, ok := d.releases[keyRev{key, rev}]; ok {
		r.until, r.deletedAt, r.done = until, deletedAt, true
		d.releases[keyRev{key, rev}] = r
	}
}

// awaitReleases waits, at most wait, until no release of key is under way,
// so that a deletion is judged with the releases' own word on what they
// deleted.
func (d *deletions) awaitReleases(key string, wait time.Duration) {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) && d.releasing(key) {
		time.Sleep(2 * time.Millisecond)
	}
}

// releasing says whether a release of key is under way.
func (d *deletions) releasing(key string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, r := range d.releases {
		if k.key == key && !r.done {
			return true
		}
	}
	return false
}

// observedUpTo drops the intents of releases that ended at or before rev,
// which the observer has now seen: whatever they deleted is recorded.
func (d *deletions) observedUpTo(rev int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, r := range d.releases {
		if r.until > 0 && r.until <= rev {
			delete(d.releases, k)
		}
	}
}

// intendRevoke notes that the owner of lease is about to revoke it.
func (d *deletions) intendRevoke(id clientv3.LeaseID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.revoking[id] = true
}

// deletion is who deleted a lock key, as the observer records it.
type deletion struct {
	owner leaseOwner
	by    string
	// releaser is, for "other-release", the client whose release deleted
	// it, and released the token that release was for.
	releaser string
	released int64
}

// deleted says who deleted etcd key, created at revision rev and attached to
// lease: its owner in a release, another client in a release of an older
// grant of the same key (a release that deletes whatever is there), its
// owner otherwise (Mutex.Lock's clean-up of its key after a failed wait: the
// lease is still alive), its owner by revoking the lease, or the server when
// the lease expired. alive reports whether the lease exists after the
// deletion (nil: unknown).
//
// "other-release" is definite, for the contract check: the lease was alive
// after the deletion (so neither expiry nor a revoke deleted the key), the
// owner had no release of this grant in progress, and another client was
// releasing an older grant of the same key.
func (d *deletions) deleted(key string, rev, at int64, lease clientv3.LeaseID, alive *bool) deletion {
	d.mu.Lock()
	defer d.mu.Unlock()
	owner := d.owners[lease]
	// A release whose own delete removed a key of this name at this
	// revision made this deletion: definite, whoever else was releasing.
	for r, intent := range d.releases {
		if r.key != key || intent.deletedAt != at || at == 0 {
			continue
		}
		delete(d.releases, r)
		if intent.client == owner.client {
			return deletion{owner: owner, by: histories.DeletedByRelease}
		}
		return deletion{owner: owner, by: histories.DeletedByOther, releaser: intent.client, released: r.rev}
	}
	k := keyRev{key, rev}
	if _, ok := d.releases[k]; ok {
		delete(d.releases, k)
		return deletion{owner: owner, by: histories.DeletedByRelease}
	}
	isAlive := alive != nil && *alive
	var other *keyRev
	for r, intent := range d.releases {
		switch {
		case r.key != key:
		case intent.client == owner.client && r.rev >= rev:
			// The owner is releasing a grant of this key whose token is
			// not the key's create revision (check-then-set's token is
			// the revision of its Put, which may follow the create): its
			// own release.
			delete(d.releases, r)
			return deletion{owner: owner, by: histories.DeletedByRelease}
		case intent.client != owner.client && r.rev < rev && isAlive && (other == nil || r.rev > other.rev):
			// Of several, the release of the newest grant.
			other = &r
		}
	}
	if other != nil {
		intent := d.releases[*other]
		delete(d.releases, *other)
		return deletion{owner: owner, by: histories.DeletedByOther, releaser: intent.client, released: other.rev}
	}
	switch {
	case isAlive:
		return deletion{owner: owner, by: histories.DeletedByAcquire}
	case d.revoking[lease]:
		return deletion{owner: owner, by: histories.DeletedByRevoke}
	}
	return deletion{owner: owner, by: histories.DeletedByExpiry}
}
