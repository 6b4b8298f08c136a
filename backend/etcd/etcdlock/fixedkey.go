package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locktest/locktest/lock"
)

// The fixed-key recipes: every client tries to create the one key
// Prefix+name, in a Txn that succeeds only if the key does not exist
// (CreateRevision == 0), under its session lease. The token is the key's
// create revision (the Txn's revision).

// SameKey is the same-key recipe: a client that finds the key taken watches
// it for its delete and retries, which wakes every waiter at once.
func SameKey() lock.Recipe {
	return RecipeFunc(SameKeyName, func(ctx context.Context, env Env) (lock.Locker, error) {
		return newFixedKey(ctx, env, fixedKeyOpts{})
	})
}

// Polling is the polling recipe with a retry interval (measured on the
// client's clock): a client that finds the key taken sleeps and retries;
// the session's keepalive is its watchdog.
func Polling(interval time.Duration) lock.Recipe {
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	return RecipeFunc(PollingName, func(ctx context.Context, env Env) (lock.Locker, error) {
		return newFixedKey(ctx, env, fixedKeyOpts{poll: interval})
	})
}

// UnlockAny is the unlock-any recipe, broken on purpose: the same-key lock,
// but its release is a plain Delete of the key, whoever holds it now. Once a
// holder outlives its lease (a pause, a slow clock), its release deletes the
// next holder's key, that holder's release the next one's, and so on.
func UnlockAny() lock.Recipe {
	return RecipeFunc(UnlockAnyName, func(ctx context.Context, env Env) (lock.Locker, error) {
		return newFixedKey(ctx, env, fixedKeyOpts{deleteAny: true})
	})
}

type fixedKeyOpts struct {
	poll      time.Duration // 0: watch for the delete
	deleteAny bool
}

type fixedKey struct {
	session
	opts fixedKeyOpts
}

func newFixedKey(ctx context.Context, env Env, opts fixedKeyOpts) (lock.Locker, error) {
	s, err := newSessionLocker(ctx, env)
	if err != nil {
		return nil, err
	}
	return &fixedKey{s, opts}, nil
}

func (l *fixedKey) Acquire(ctx context.Context, name string) (lock.Held, error) {
	key := l.env.Prefix + name
	lease := l.s.Lease()
	for {
		resp, err := l.env.Client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, l.env.Name, clientv3.WithLease(lease))).
			Else(clientv3.OpGet(key)).
			Commit()
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			return nil, l.ended()
		case err != nil:
			return nil, err
		case resp.Succeeded:
			return &fixedHeld{key: key, token: resp.Header.Revision, s: l.session, deleteAny: l.opts.deleteAny}, nil
		}
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 && kvs[0].Lease == int64(lease) {
			// Ours already (an earlier grant never released).
			return &fixedHeld{key: key, token: kvs[0].CreateRevision, s: l.session, deleteAny: l.opts.deleteAny}, nil
		}
		if l.opts.poll > 0 {
			err = l.sleep(ctx, l.opts.poll)
		} else {
			err = waitDelete(ctx, l.env.Client, key, resp.Header.Revision+1, l.s.Done())
		}
		if err != nil {
			return nil, err
		}
	}
}

// sleep waits d of the client's clock; a session that ends meanwhile fails
// the acquire definitely.
func (l *fixedKey) sleep(ctx context.Context, d time.Duration) error {
	t := l.env.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-l.s.Done():
		return l.ended()
	case <-ctx.Done():
		return fmt.Errorf("%w (waiting to retry)", ctx.Err())
	}
}

// waitDelete waits until key is deleted at revision from or later. A
// session that ends meanwhile (done) fails it definitely: the waiter created
// nothing.
func waitDelete(ctx context.Context, cli *clientv3.Client, key string, from int64, done <-chan struct{}) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := cli.Watch(wctx, key, clientv3.WithRev(from), clientv3.WithFilterPut())
	for {
		select {
		case resp, ok := <-wch:
			if !ok {
				if ctx.Err() != nil {
					return fmt.Errorf("%w (waiting for %s to be deleted)", ctx.Err(), key)
				}
				return fmt.Errorf("watch of %s closed", key)
			}
			if err := resp.Err(); err != nil {
				return fmt.Errorf("watch of %s: %w", key, err)
			}
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypeDelete {
					return nil
				}
			}
		case <-done:
			return fmt.Errorf("%w: the session's lease is gone", lock.ErrNotAcquired)
		case <-ctx.Done():
			return fmt.Errorf("%w (waiting for %s to be deleted)", ctx.Err(), key)
		}
	}
}

type fixedHeld struct {
	key       string
	token     int64
	s         session
	deleteAny bool
}

func (h *fixedHeld) Token() int64 { return h.token }

func (h *fixedHeld) Release(ctx context.Context) error {
	cli := h.s.env.Client
	if h.deleteAny {
		_, err := cli.Delete(ctx, h.key) // the bug: whoever holds it now
		return err
	}
	// Delete the key only if it is still this grant's; otherwise there is
	// nothing of ours to release.
	_, err := cli.Txn(ctx).If(h.Guard()).Then(clientv3.OpDelete(h.key)).Commit()
	return err
}

func (h *fixedHeld) Done() <-chan struct{} { return h.s.Done() }
func (h *fixedHeld) Guard() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(h.key), "=", h.token)
}
func (h *fixedHeld) Key() string               { return h.key }
func (h *fixedHeld) LeaseID() clientv3.LeaseID { return h.s.LeaseID() }
