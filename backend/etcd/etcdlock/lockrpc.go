package etcdlock

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"

	"github.com/locktest/locktest/lock"
)

// LockRPC is the lock-rpc recipe: etcd's server-side Lock API (v3lockpb
// Lock and Unlock) under the client's session lease, what etcdctl lock and
// Jepsen's etcd suite use. The server runs concurrency.Mutex on the
// client's behalf; the token is the create revision of the key it returns.
//
// Like etcdctl lock, it trusts the server's grant: a grant of a key that
// is already gone is held. etcd 3.4's server grants one to a waiter whose
// lease expired while it queued (etcd#11456); since 3.5 the server refuses
// ("session is expired").
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
		if strings.Contains(err.Error(), concurrency.ErrSessionExpired.Error()) {
			return nil, fmt.Errorf("%w: %v", lock.ErrNotAcquired, err)
		}
		return nil, err
	}
	key := string(resp.Key)
	token, err := l.createRevision(ctx, key)
	if err != nil {
		return nil, err
	}
	return &lockRPCHeld{l: l, key: key, token: token, rev: resp.Header.GetRevision()}, nil
}

// createRevision finds the token: the response's revision is when the lock
// was granted, not when the key was created. A key already gone (a grant
// the server should have refused) is looked up in the key's history, which
// the clusters locktest starts never compact.
func (l *lockRPCLocker) createRevision(ctx context.Context, key string) (int64, error) {
	g, err := l.env.Client.Get(ctx, key)
	if err != nil {
		return 0, err
	}
	if len(g.Kvs) > 0 {
		return g.Kvs[0].CreateRevision, nil
	}
	// A watch from revision 1 delivers the key's past events at once, in
	// one response (they are few); a key that never existed has none, and
	// the wait ends with the timeout.
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var created int64
	for w := range l.env.Client.Watch(wctx, key, clientv3.WithRev(1)) {
		if err := w.Err(); err != nil {
			return 0, err
		}
		for _, ev := range w.Events {
			if ev.Type == clientv3.EventTypePut && ev.Kv.Lease == int64(l.s.Lease()) {
				created = ev.Kv.CreateRevision
			}
		}
		if len(w.Events) > 0 {
			break
		}
	}
	if created == 0 {
		return 0, fmt.Errorf("%w: lock key %s was gone at the grant and its creation is not in the history", lock.ErrNotAcquired, key)
	}
	return created, nil
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
