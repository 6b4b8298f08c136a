package etcdlock

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locktest/locktest/lock"
)

// ElectionRetry is the election recipe of a service that retries a Resign
// that failed, as services do on an error: up to resignTries times,
// resignBackoff apart on the client's clock. etcd's Election.Resign
// forgets its leadership before it knows that its delete was applied
// (etcd#22123, open upstream): when the delete never reached etcd, the
// retry finds nothing to resign and returns nil, the release is reported
// done, and the leader key stays under the session's lease. The session's
// next Campaign finds its own key there and leads again on the old one: a
// grant whose token does not grow.
func ElectionRetry() lock.Recipe {
	return RecipeFunc(ElectionRetryName, func(ctx context.Context, env Env) (lock.Locker, error) {
		return newResignLocker(ctx, env, false)
	})
}

// ElectionRetryKept is ElectionRetry with the fix proposed upstream for
// etcd#22123 (pull requests 22124, 22211): Resign keeps its leadership
// when its delete fails, so that the retry deletes the key; done here with
// the Election's own comparison (the key's create revision is the
// leader's) before Resign clears the Election's state.
func ElectionRetryKept() lock.Recipe {
	return RecipeFunc(ElectionRetryKeptName, func(ctx context.Context, env Env) (lock.Locker, error) {
		return newResignLocker(ctx, env, true)
	})
}

// resignTries and resignBackoff are the service's retries of a Resign.
const (
	resignTries   = 3
	resignBackoff = 200 * time.Millisecond
)

type resignLocker struct {
	electionLocker
	kept bool
}

func newResignLocker(ctx context.Context, env Env, kept bool) (lock.Locker, error) {
	s, err := newSessionLocker(ctx, env)
	if err != nil {
		return nil, err
	}
	return &resignLocker{electionLocker: electionLocker{s}, kept: kept}, nil
}

func (l *resignLocker) Acquire(ctx context.Context, name string) (lock.Held, error) {
	h, err := l.electionLocker.Acquire(ctx, name)
	if err != nil {
		return nil, err
	}
	return &resignHeld{electionHeld: h.(*electionHeld), l: l}, nil
}

type resignHeld struct {
	*electionHeld
	l *resignLocker
}

// Release resigns, and retries a Resign that failed.
func (h *resignHeld) Release(ctx context.Context) error {
	err := h.resign(ctx)
	for i := 1; i < resignTries && err != nil && ctx.Err() == nil; i++ {
		t := h.l.env.Clock.NewTimer(resignBackoff)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		err = h.resign(ctx)
	}
	return err
}

// resign is Election.Resign, or with kept the fix's: the delete first,
// and the Election's state cleared only once it was answered.
func (h *resignHeld) resign(ctx context.Context) error {
	if !h.l.kept {
		return h.e.Resign(ctx)
	}
	if h.e.Key() == "" {
		return nil
	}
	cmp := clientv3.Compare(clientv3.CreateRevision(h.e.Key()), "=", h.e.Rev())
	if _, err := h.l.env.Client.Txn(ctx).If(cmp).Then(clientv3.OpDelete(h.e.Key())).Commit(); err != nil {
		return err
	}
	// The key is gone: Resign's own delete finds nothing; it clears the
	// Election's state, whatever it answers.
	_ = h.e.Resign(ctx)
	return nil
}
