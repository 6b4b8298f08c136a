package etcdlock

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locktest/locktest/lock"
)

// NoRenew is the no-renew recipe, broken on purpose: the fixed key, created
// in a Txn (CreateRevision == 0) under a lease of TTL seconds granted for
// the attempt, which nobody keeps alive. A critical section longer than the
// TTL outlives its lock: the server deletes the key and another client
// takes it while the first still believes it holds. Waiters watch the key
// for its delete. It has no session, so it cannot tell a holder that its
// lease ran out.
func NoRenew() lock.Recipe {
	return RecipeFunc(NoRenewName, func(_ context.Context, env Env) (lock.Locker, error) {
		return &noRenew{env: env}, nil
	})
}

type noRenew struct{ env Env }

func (l *noRenew) Close() error { return nil }

func (l *noRenew) Acquire(ctx context.Context, name string) (lock.Held, error) {
	key := l.env.Prefix + name
	cli := l.env.Client
	for {
		g, err := cli.Get(ctx, key)
		if err != nil {
			return nil, err
		}
		if len(g.Kvs) == 0 {
			lg, err := cli.Grant(ctx, int64(l.env.TTL))
			if err != nil {
				return nil, fmt.Errorf("granting the lease: %w", err)
			}
			resp, err := cli.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
				Then(clientv3.OpPut(key, l.env.Name, clientv3.WithLease(lg.ID))).
				Commit()
			switch {
			case errors.Is(err, rpctypes.ErrLeaseNotFound):
				// The lease ran out before the Txn: nothing was created.
				continue
			case err != nil:
				return nil, err
			case resp.Succeeded:
				return &noRenewHeld{cli: cli, key: key, token: resp.Header.Revision, lease: lg.ID}, nil
			}
			// Taken meanwhile: the lease is of no use.
			go cli.Revoke(context.WithoutCancel(ctx), lg.ID)
			g = &clientv3.GetResponse{Header: resp.Header}
		}
		if err := waitDelete(ctx, cli, key, g.Header.Revision+1, nil); err != nil {
			return nil, err
		}
	}
}

type noRenewHeld struct {
	cli   *clientv3.Client
	key   string
	token int64
	lease clientv3.LeaseID
}

func (h *noRenewHeld) Token() int64 { return h.token }

func (h *noRenewHeld) Release(ctx context.Context) error {
	_, err := h.cli.Txn(ctx).If(h.Guard()).Then(clientv3.OpDelete(h.key)).Commit()
	if err == nil {
		go h.cli.Revoke(context.WithoutCancel(ctx), h.lease)
	}
	return err
}

func (h *noRenewHeld) Guard() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(h.key), "=", h.token)
}
func (h *noRenewHeld) Key() string               { return h.key }
func (h *noRenewHeld) LeaseID() clientv3.LeaseID { return h.lease }
