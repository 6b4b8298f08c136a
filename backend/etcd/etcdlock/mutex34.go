package etcdlock

import (
	"context"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locktest/locktest/lock"
)

// Mutex34 is the mutex-3.4 recipe, broken on purpose: the revision queue of
// concurrency.Mutex as its Lock behaved before the fix for etcd#11456 (the
// bug Jepsen found in etcd 3.4). A waiter waits for every key before its own
// to be deleted and then reports the lock as held, without reading its own
// key again: a waiter whose lease expired while it queued is told it holds
// a lock whose key no longer exists. The fixed Mutex re-reads its key and
// returns ErrSessionExpired.
func Mutex34() lock.Recipe { return RecipeFunc(Mutex34Name, newMutex34Locker) }

type mutex34Locker struct{ session }

func newMutex34Locker(ctx context.Context, env Env) (lock.Locker, error) {
	s, err := newSessionLocker(ctx, env)
	if err != nil {
		return nil, err
	}
	return &mutex34Locker{s}, nil
}

func (l *mutex34Locker) Acquire(ctx context.Context, name string) (lock.Held, error) {
	cli := l.s.Client()
	pfx := l.env.Prefix + name + "/"
	key := fmt.Sprintf("%s%x", pfx, l.s.Lease())
	// Queue up: create the own key (or find it from an earlier attempt) and
	// read the first key in line, in one step.
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, "", clientv3.WithLease(l.s.Lease())), clientv3.OpGet(pfx, clientv3.WithFirstCreate()...)).
		Else(clientv3.OpGet(key), clientv3.OpGet(pfx, clientv3.WithFirstCreate()...)).
		Commit()
	if err != nil {
		return nil, err
	}
	h := &mutex34Held{l: l, key: key, token: resp.Header.Revision, rev: resp.Header.Revision}
	if !resp.Succeeded {
		h.token = resp.Responses[0].GetResponseRange().Kvs[0].CreateRevision
	}
	if first := resp.Responses[1].GetResponseRange().Kvs; len(first) == 0 || first[0].CreateRevision == h.token {
		return h, nil
	}
	hdr, err := waitPredecessors(ctx, cli, pfx, h.token-1)
	if err != nil {
		h.Release(context.WithoutCancel(ctx))
		return nil, err
	}
	// The bug: the queue emptied ahead of us, so the lock is taken as held.
	// Whether the own key still exists is never asked.
	h.rev = hdr.Revision
	return h, nil
}

// waitPredecessors waits until no key under pfx created at or before
// maxRev remains, and returns the header of the read that found none.
func waitPredecessors(ctx context.Context, cli *clientv3.Client, pfx string, maxRev int64) (*pb.ResponseHeader, error) {
	for {
		resp, err := cli.Get(ctx, pfx, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(maxRev))...)
		if err != nil {
			return nil, err
		}
		if len(resp.Kvs) == 0 {
			return resp.Header, nil
		}
		if err := waitKeyDeleted(ctx, cli, string(resp.Kvs[0].Key), resp.Header.Revision); err != nil {
			return nil, err
		}
	}
}

// waitKeyDeleted watches key from rev until it is deleted.
func waitKeyDeleted(ctx context.Context, cli *clientv3.Client, key string, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for wr := range cli.Watch(wctx, key, clientv3.WithRev(rev)) {
		if err := wr.Err(); err != nil {
			return err
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("lock: watch on %s ended", key)
}

type mutex34Held struct {
	l     *mutex34Locker
	key   string
	token int64
	rev   int64 // the revision of the read the grant was decided on
}

func (h *mutex34Held) Token() int64 { return h.token }
func (h *mutex34Held) Release(ctx context.Context) error {
	_, err := h.l.s.Client().Delete(ctx, h.key)
	return err
}
func (h *mutex34Held) Done() <-chan struct{} { return h.l.s.Done() }
func (h *mutex34Held) Guard() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(h.key), "=", h.token)
}
func (h *mutex34Held) Revision() int64           { return h.rev }
func (h *mutex34Held) Key() string               { return h.key }
func (h *mutex34Held) LeaseID() clientv3.LeaseID { return h.l.s.Lease() }
