package etcdlock

import (
	"context"
	"fmt"

	"github.com/locktest/locktest/lock"
)

// ElectionChecked is the election-checked recipe: the election recipe with
// the guard a team can add today against etcd's Election.Campaign, which
// (in etcd 3.6 as in 3.4) returns leadership after waiting for the earlier
// candidates' keys to go without reading its own key again. A candidate
// whose lease expired while it waited is then a leader whose key no longer
// exists (phantom leadership, etcd issue #11051). After Campaign, this
// recipe reads its own key and refuses leadership when the key is gone or
// is no longer the one it created.
func ElectionChecked() lock.Recipe { return RecipeFunc(ElectionCheckedName, newElectionCheckedLocker) }

type electionCheckedLocker struct{ *electionLocker }

func newElectionCheckedLocker(ctx context.Context, env Env) (lock.Locker, error) {
	l, err := newElectionLocker(ctx, env)
	if err != nil {
		return nil, err
	}
	return electionCheckedLocker{l.(*electionLocker)}, nil
}

func (l electionCheckedLocker) Acquire(ctx context.Context, name string) (lock.Held, error) {
	held, err := l.electionLocker.Acquire(ctx, name)
	if err != nil {
		return nil, err
	}
	h := held.(*electionHeld)
	resp, err := l.s.Client().Get(ctx, h.key)
	if err != nil {
		h.Release(context.WithoutCancel(ctx))
		return nil, err
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != h.token {
		h.Release(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("%w: leader key %s gone when Campaign returned", lock.ErrNotAcquired, h.key)
	}
	return h, nil
}
