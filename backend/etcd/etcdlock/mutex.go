package etcdlock

import (
	"context"
	"errors"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/locktest/locktest/lock"
)

// Mutex is the mutex recipe: concurrency.NewSession and
// concurrency.NewMutex. The token is the create revision of the client's
// key under the lock's prefix.
func Mutex() lock.Recipe { return RecipeFunc(MutexName, newMutexLocker) }

type mutexLocker struct{ session }

func newMutexLocker(ctx context.Context, env Env) (lock.Locker, error) {
	s, err := newSessionLocker(ctx, env)
	if err != nil {
		return nil, err
	}
	return &mutexLocker{s}, nil
}

func (l *mutexLocker) Acquire(ctx context.Context, name string) (lock.Held, error) {
	m := concurrency.NewMutex(l.s, l.env.Prefix+name)
	if err := m.Lock(ctx); err != nil {
		if errors.Is(err, concurrency.ErrSessionExpired) {
			// Lock re-read its own key after waiting and found it gone.
			return nil, fmt.Errorf("%w: %v", lock.ErrNotAcquired, err)
		}
		return nil, err
	}
	return &mutexHeld{m: m, s: l.s, token: createRevision(m.IsOwner())}, nil
}

type mutexHeld struct {
	m     *concurrency.Mutex
	s     *concurrency.Session
	token int64
}

func (h *mutexHeld) Token() int64                      { return h.token }
func (h *mutexHeld) Release(ctx context.Context) error { return h.m.Unlock(ctx) }
func (h *mutexHeld) Done() <-chan struct{}             { return h.s.Done() }
func (h *mutexHeld) Guard() clientv3.Cmp               { return h.m.IsOwner() }
func (h *mutexHeld) Key() string                       { return h.m.Key() }
func (h *mutexHeld) LeaseID() clientv3.LeaseID         { return h.s.Lease() }

// createRevision is the revision a create-revision comparison compares
// with. Mutex keeps its key's revision privately, but IsOwner carries it,
// which spares an RPC.
func createRevision(c clientv3.Cmp) int64 {
	cmp := pb.Compare(c)
	if cr, ok := cmp.TargetUnion.(*pb.Compare_CreateRevision); ok {
		return cr.CreateRevision
	}
	return 0
}
