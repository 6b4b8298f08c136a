package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/locktest/locktest/lock"
)

// MutexRetry is the mutex recipe of a service that retries an Unlock that
// failed, as services do on an error: it keeps its session (one for the
// service's life, a Mutex per grant), keeps the Mutex whose Unlock failed,
// and calls its Unlock again once etcd answers it again, right after the
// session's next Lock. etcd's Mutex names its key after the session's
// lease, so the next Lock of the same session creates the same key; if the
// failed Unlock's delete was applied and only its reply was lost, the retry
// deletes the newer grant's key, which its holder still believes it holds
// (etcd#22082, open upstream).
func MutexRetry() lock.Recipe {
	return RecipeFunc(MutexRetryName, func(ctx context.Context, env Env) (lock.Locker, error) {
		return newRetryLocker(ctx, env, false)
	})
}

// MutexRetryOwned is MutexRetry whose retried delete takes effect only while
// the Mutex still owns its key (a Txn comparing the key's create revision
// with the grant's, Mutex.IsOwner), as the fix proposed upstream for
// etcd#22082 (pull request 22115) makes Unlock do: a stale retry deletes
// nothing.
func MutexRetryOwned() lock.Recipe {
	return RecipeFunc(MutexRetryOwnedName, func(ctx context.Context, env Env) (lock.Locker, error) {
		return newRetryLocker(ctx, env, true)
	})
}

type retryLocker struct {
	session
	owned bool
	// ctx ends when the locker closes: retries under way stop.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	pending []*concurrency.Mutex // grants whose Unlock failed, to retry
}

func newRetryLocker(ctx context.Context, env Env, owned bool) (lock.Locker, error) {
	s, err := newSessionLocker(ctx, env)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.Background())
	return &retryLocker{session: s, owned: owned, ctx: rctx, cancel: cancel}, nil
}

// RetriesReleases: the harness keeps the locker, and its session, after a
// release of unknown outcome (lock.Retrier).
func (l *retryLocker) RetriesReleases() {}

func (l *retryLocker) Acquire(ctx context.Context, name string) (lock.Held, error) {
	m := concurrency.NewMutex(l.s, l.env.Prefix+name)
	if err := m.Lock(ctx); err != nil {
		if errors.Is(err, concurrency.ErrSessionExpired) {
			return nil, fmt.Errorf("%w: %v", lock.ErrNotAcquired, err)
		}
		return nil, err
	}
	// etcd answers again: the unlocks that failed are retried now.
	l.retryPending()
	return &retryHeld{mutexHeld: mutexHeld{m: m, s: l.s, token: createRevision(m.IsOwner())}, l: l}, nil
}

// retryBackoff is how long, on the client's clock, the service waits after
// a Lock before it retries the unlocks that failed, as retries back off.
// It also keeps the retry out of the acquire itself: the harness takes the
// newest revision the client read until the grant is recorded as the state
// the grant was decided on, and the observer a deletion of the key before
// then as the acquire's own; a retry that came first would be read as
// both.
const retryBackoff = 100 * time.Millisecond

// retryPending retries, in the background after retryBackoff, the unlocks
// that failed; one that fails again waits for the next chance.
func (l *retryLocker) retryPending() {
	l.mu.Lock()
	ms := l.pending
	l.pending = nil
	l.mu.Unlock()
	if len(ms) == 0 {
		return
	}
	l.wg.Go(func() {
		t := l.env.Clock.NewTimer(retryBackoff)
		defer t.Stop()
		select {
		case <-t.C:
		case <-l.ctx.Done():
			return
		}
		for _, m := range ms {
			ctx, cancel := l.env.Clock.WithTimeout(l.ctx, time.Duration(l.env.TTL)*time.Second)
			if err := l.unlock(ctx, m); err != nil && l.ctx.Err() == nil {
				l.pend(m)
			}
			cancel()
		}
	})
}

func (l *retryLocker) pend(m *concurrency.Mutex) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending = append(l.pending, m)
}

// unlock is Mutex.Unlock, or with owned a delete that takes effect only
// while m still owns its key.
func (l *retryLocker) unlock(ctx context.Context, m *concurrency.Mutex) error {
	if !l.owned {
		return m.Unlock(ctx)
	}
	_, err := l.env.Client.Txn(ctx).If(m.IsOwner()).Then(clientv3.OpDelete(m.Key())).Commit()
	return err
}

// Close stops the retries and ends the session.
func (l *retryLocker) Close() error {
	l.cancel()
	l.wg.Wait()
	return l.session.Close()
}

type retryHeld struct {
	mutexHeld
	l *retryLocker
}

// Release unlocks; an Unlock that fails is kept to be retried, and its
// error returned: the caller does not know whether it took effect.
func (h *retryHeld) Release(ctx context.Context) error {
	err := h.l.unlock(ctx, h.m)
	if err != nil {
		h.l.pend(h.m)
	}
	return err
}
