package etcdlock

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"

	"github.com/locktest/locktest/lock"
)

// LockRPC is the lock-rpc recipe: etcd's server-side Lock API (v3lockpb
// Lock and Unlock) under the client's session lease, what etcdctl lock and
// Jepsen's etcd suite use. The server runs concurrency.Mutex on the
// client's behalf; the token is the create revision of the key it returns.
func LockRPC() lock.Recipe { return RecipeFunc(LockRPCName, newLockRPCLocker) }

type lockRPCLocker struct {
	session
	rpc v3lockpb.LockClient
}

func newLockRPCLocker(ctx context.Context, env Env) (lock.Locker, error) {
	s, err := newSessionLocker(ctx, env)
	if err != nil {
		return nil, err
	}
	return &lockRPCLocker{s, v3lockpb.NewLockClient(env.Client.ActiveConnection())}, nil
}

func (l *lockRPCLocker) Acquire(ctx context.Context, name string) (lock.Held, error) {
	resp, err := l.rpc.Lock(ctx, &v3lockpb.LockRequest{Name: []byte(l.env.Prefix + name), Lease: int64(l.s.Lease())})
	if err != nil {
		return nil, err
	}
	key := string(resp.Key)
	// The response's revision is when the lock was granted, not the key's
	// creation: ask for the key.
	g, err := l.env.Client.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	if len(g.Kvs) == 0 {
		// Gone already: its lease ended. Nothing can grant it any more.
		return nil, fmt.Errorf("%w: lock key %s gone right after the grant", lock.ErrNotAcquired, key)
	}
	return &lockRPCHeld{l: l, key: key, token: g.Kvs[0].CreateRevision, rev: resp.Header.GetRevision()}, nil
}

type lockRPCHeld struct {
	l     *lockRPCLocker
	key   string
	token int64
	rev   int64 // the Lock response's header revision
}

func (h *lockRPCHeld) Token() int64 { return h.token }
func (h *lockRPCHeld) Release(ctx context.Context) error {
	_, err := h.l.rpc.Unlock(ctx, &v3lockpb.UnlockRequest{Key: []byte(h.key)})
	return err
}
func (h *lockRPCHeld) Done() <-chan struct{} { return h.l.s.Done() }
func (h *lockRPCHeld) Guard() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(h.key), "=", h.token)
}
func (h *lockRPCHeld) Revision() int64           { return h.rev }
func (h *lockRPCHeld) Key() string               { return h.key }
func (h *lockRPCHeld) LeaseID() clientv3.LeaseID { return h.l.s.Lease() }
