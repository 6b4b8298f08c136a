package etcd

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locktest/locktest/clock"
)

// clockLease is a client's clientv3.Lease with keepalives driven by the
// client's clock. clientv3's own keepalive loop runs on the host clock (it
// renews every TTL/3 of host time and gives a lease up TTL of host time after
// its last response), so a client whose clock is skewed would renew on time
// and skew would change nothing. Installed as the client's Lease
// (clientv3.Client embeds the Lease interface), it serves
// concurrency.NewSession's Grant and KeepAlive; everything but Grant and
// KeepAlive goes straight to the real lease.
//
// Its KeepAlive sends KeepAliveOnce every TTL/3 of client-clock time,
// forwards the answers, and closes the channel (ending the session) when the
// server says the lease is gone, when the lease's end on the client's clock
// passes without a renewal, or when ctx ends. The client's idea of that end
// is the send time of the last renewal the server answered (or of the grant)
// plus the TTL, all on its clock. While the client is paused the loop sends
// nothing.
type clockLease struct {
	clientv3.Lease // the real one
	clock          *clock.Clock
	// paused blocks while the client is paused (workload.Client.Paused).
	paused func(ctx context.Context) error

	mu     sync.Mutex
	leases map[clientv3.LeaseID]*leaseView
	// trace, if set (tests), is called at every keepalive send with the
	// host time.
	trace func(id clientv3.LeaseID, sent time.Time)
}

// leaseView is what the client believes about one of its leases.
type leaseView struct {
	ttl    time.Duration
	expiry time.Time // client clock: when the client believes the lease ends
	gone   bool      // the client knows or believes the lease is over
}

const (
	// defaultLeaseTTL is assumed for a lease this wrapper did not grant,
	// until its first renewal (as clientv3 does).
	defaultLeaseTTL = 5 * time.Second
	// keepAliveRetry is the wait before retrying a failed renewal (clientv3's
	// retryConnWait).
	keepAliveRetry = 500 * time.Millisecond
)

func newClockLease(real clientv3.Lease, c *clock.Clock, paused func(ctx context.Context) error) *clockLease {
	return &clockLease{Lease: real, clock: c, paused: paused, leases: map[clientv3.LeaseID]*leaseView{}}
}

// Grant grants a lease and starts the client's view of it: it ends TTL after
// the request was sent, on the client's clock.
func (l *clockLease) Grant(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
	sent := l.clock.Now()
	resp, err := l.Lease.Grant(ctx, ttl)
	if err != nil {
		return resp, err
	}
	d := time.Duration(resp.TTL) * time.Second
	l.mu.Lock()
	l.leases[resp.ID] = &leaseView{ttl: d, expiry: sent.Add(d)}
	l.mu.Unlock()
	return resp, nil
}

// view returns the client's view of id, creating one for a lease it did not
// grant.
func (l *clockLease) view(id clientv3.LeaseID) *leaseView {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.leases[id]
	if !ok {
		v = &leaseView{ttl: defaultLeaseTTL, expiry: l.clock.Now().Add(defaultLeaseTTL)}
		l.leases[id] = v
	}
	return v
}

// forget drops the view of a lease the client no longer uses.
func (l *clockLease) forget(id clientv3.LeaseID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.leases, id)
}

// expired reports whether the client's clock has passed the lease's end, and
// if so marks the lease gone. It returns the end otherwise.
func (l *clockLease) expired(v *leaseView) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if v.gone || !l.clock.Now().Before(v.expiry) {
		v.gone = true
		return v.expiry, true
	}
	return v.expiry, false
}

// renewed records a renewal sent at sent (client clock) with the TTL the
// server granted, and returns the new end and the TTL.
func (l *clockLease) renewed(v *leaseView, sent time.Time, ttlSeconds int64) (time.Time, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v.ttl = time.Duration(ttlSeconds) * time.Second
	if end := sent.Add(v.ttl); end.After(v.expiry) {
		v.expiry = end
	}
	return v.expiry, v.ttl
}

func (l *clockLease) markGone(v *leaseView) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v.gone = true
}

// KeepAlive keeps id alive on the client's clock; see clockLease.
func (l *clockLease) KeepAlive(ctx context.Context, id clientv3.LeaseID) (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	ch := make(chan *clientv3.LeaseKeepAliveResponse, clientv3.LeaseResponseChSize)
	go l.keepAliveLoop(ctx, id, l.view(id), ch)
	return ch, nil
}

type renewal struct {
	sent time.Time // client clock
	resp *clientv3.LeaseKeepAliveResponse
	err  error
}

func (l *clockLease) keepAliveLoop(ctx context.Context, id clientv3.LeaseID, v *leaseView, out chan<- *clientv3.LeaseKeepAliveResponse) {
	defer close(out)
	actx, cancelAttempts := context.WithCancel(ctx)
	defer cancelAttempts()
	results := make(chan renewal, 1) // at most one renewal in flight

	l.mu.Lock()
	ttl, end := v.ttl, v.expiry
	l.mu.Unlock()
	send := l.clock.NewTimer(0) // the first renewal goes at once, as in clientv3
	defer send.Stop()
	deadline := l.clock.NewTimer(l.clock.Until(end))
	defer deadline.Stop()

	for {
		select {
		case <-ctx.Done():
			return
		case <-send.C:
			if l.paused(ctx) != nil {
				return
			}
			if _, over := l.expired(v); over {
				return
			}
			sent := l.clock.Now()
			if l.trace != nil {
				l.trace(id, time.Now())
			}
			go func() {
				// Bound one attempt by a renewal period of client time, so a
				// stalled link does not stall the loop for good.
				rctx, cancel := l.clock.WithTimeout(actx, max(ttl/3, 100*time.Millisecond))
				resp, err := l.Lease.KeepAliveOnce(rctx, id)
				cancel()
				results <- renewal{sent, resp, err}
			}()
		case r := <-results:
			if l.paused(ctx) != nil {
				return
			}
			switch {
			case r.err == nil && r.resp.TTL > 0:
				end, ttl = l.renewed(v, r.sent, r.resp.TTL)
				deadline.Reset(l.clock.Until(end))
				select {
				case out <- r.resp:
				default: // as clientv3: drop when the consumer lags
				}
				send.Reset(ttl / 3)
			case r.err == nil || errors.Is(r.err, rpctypes.ErrLeaseNotFound):
				l.markGone(v)
				return
			default:
				if ctx.Err() != nil {
					return
				}
				send.Reset(keepAliveRetry)
			}
		case <-deadline.C:
			if l.paused(ctx) != nil {
				return
			}
			end, over := l.expired(v)
			if over {
				return
			}
			deadline.Reset(l.clock.Until(end))
		}
	}
}

// leaseHex writes a lease ID as the history does.
func leaseHex(id clientv3.LeaseID) string { return strconv.FormatInt(int64(id), 16) }
