package etcdlock

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locktest/locktest/lock"
)

// CheckThenSet is the check-then-set recipe, broken on purpose: Get the
// fixed key, and if it is absent Put it under the session lease; otherwise
// watch it for its delete and try again. The Get and the Put are two
// requests, not one transaction: waiters woken by the same delete all find
// the key absent and all Put it, and each believes it holds the lock. The
// token is the revision of the client's Put.
func CheckThenSet() lock.Recipe {
	return RecipeFunc(CheckThenSetName, func(ctx context.Context, env Env) (lock.Locker, error) {
		s, err := newSessionLocker(ctx, env)
		if err != nil {
			return nil, err
		}
		return &checkThenSet{s}, nil
	})
}

type checkThenSet struct{ session }

func (l *checkThenSet) Acquire(ctx context.Context, name string) (lock.Held, error) {
	key := l.env.Prefix + name
	lease := l.s.Lease()
	for {
		g, err := l.env.Client.Get(ctx, key)
		if err != nil {
			return nil, err
		}
		if len(g.Kvs) == 0 {
			p, err := l.env.Client.Put(ctx, key, l.env.Name, clientv3.WithLease(lease))
			switch {
			case errors.Is(err, rpctypes.ErrLeaseNotFound):
				return nil, l.ended()
			case err != nil:
				return nil, err
			}
			return &checkThenSetHeld{key: key, token: p.Header.Revision, s: l.session}, nil
		}
		if err := waitDelete(ctx, l.env.Client, key, g.Header.Revision+1, l.s.Done()); err != nil {
			return nil, err
		}
	}
}

type checkThenSetHeld struct {
	key   string
	token int64
	s     session
}

func (h *checkThenSetHeld) Token() int64 { return h.token }

// Release deletes the key if it is still the client's Put: the release is
// careful; the acquire is the bug.
func (h *checkThenSetHeld) Release(ctx context.Context) error {
	_, err := h.s.env.Client.Txn(ctx).If(h.Guard()).Then(clientv3.OpDelete(h.key)).Commit()
	return err
}

func (h *checkThenSetHeld) Done() <-chan struct{} { return h.s.Done() }

// Guard holds while the key is the client's Put: a later Put by another
// client changes its mod revision.
func (h *checkThenSetHeld) Guard() clientv3.Cmp {
	return clientv3.Compare(clientv3.ModRevision(h.key), "=", h.token)
}
func (h *checkThenSetHeld) Key() string               { return h.key }
func (h *checkThenSetHeld) LeaseID() clientv3.LeaseID { return h.s.LeaseID() }
