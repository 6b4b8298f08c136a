package etcd

import (
	"context"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// revisions tracks the newest etcd revision a client has read from the
// server: the header revision of every KV response and of every watch
// response its lock consumed. The contract check judges a grant by the state
// it was decided on, and a lock decides on what it read; installed as the
// client's KV and Watcher (clientv3.Client embeds both interfaces), it sees
// the reads of any recipe that goes through the client, including those of
// etcd's concurrency package. Election.Campaign, for one, sets its own
// header from its Txn, not from the watch it waited on: only reads tell the
// state a grant was decided on.
type revisions struct {
	max atomic.Int64
	// deleted is the revision of the newest delete, since the last reset,
	// that removed a key: a release's own word for what it deleted.
	deleted atomic.Int64
}

// reset starts a new window (one Acquire, one Release).
func (r *revisions) reset() { r.max.Store(0); r.deleted.Store(0) }

// deletedAt is the revision at which a delete since the last reset removed
// a key, or 0.
func (r *revisions) deletedAt() int64 { return r.deleted.Load() }

// noteDelete notes a delete that removed n keys at the header's revision.
func (r *revisions) noteDelete(h interface{ GetRevision() int64 }, n int64) {
	if h != nil && n > 0 {
		r.deleted.Store(h.GetRevision())
	}
}

// newest is the newest revision read since the last reset.
func (r *revisions) newest() int64 { return r.max.Load() }

func (r *revisions) note(h interface{ GetRevision() int64 }) {
	if h == nil {
		return
	}
	rev := h.GetRevision()
	for {
		cur := r.max.Load()
		if rev <= cur || r.max.CompareAndSwap(cur, rev) {
			return
		}
	}
}

// trackedKV is a client's KV, noting each response's revision.
type trackedKV struct {
	clientv3.KV
	r *revisions
}

func (k trackedKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	resp, err := k.KV.Put(ctx, key, val, opts...)
	if err == nil {
		k.r.note(resp.Header)
	}
	return resp, err
}

func (k trackedKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	resp, err := k.KV.Get(ctx, key, opts...)
	if err == nil {
		k.r.note(resp.Header)
	}
	return resp, err
}

func (k trackedKV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	resp, err := k.KV.Delete(ctx, key, opts...)
	if err == nil {
		k.r.note(resp.Header)
		k.r.noteDelete(resp.Header, resp.Deleted)
	}
	return resp, err
}

func (k trackedKV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	resp, err := k.KV.Do(ctx, op)
	if err == nil {
		switch {
		case resp.Get() != nil:
			k.r.note(resp.Get().Header)
		case resp.Put() != nil:
			k.r.note(resp.Put().Header)
		case resp.Del() != nil:
			k.r.note(resp.Del().Header)
			k.r.noteDelete(resp.Del().Header, resp.Del().Deleted)
		case resp.Txn() != nil:
			k.r.note(resp.Txn().Header)
		}
	}
	return resp, err
}

func (k trackedKV) Txn(ctx context.Context) clientv3.Txn { return trackedTxn{k.KV.Txn(ctx), k.r} }

type trackedTxn struct {
	clientv3.Txn
	r *revisions
}

func (t trackedTxn) If(cs ...clientv3.Cmp) clientv3.Txn { return trackedTxn{t.Txn.If(cs...), t.r} }
func (t trackedTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	return trackedTxn{t.Txn.Then(ops...), t.r}
}
func (t trackedTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	return trackedTxn{t.Txn.Else(ops...), t.r}
}

func (t trackedTxn) Commit() (*clientv3.TxnResponse, error) {
	resp, err := t.Txn.Commit()
	if err == nil {
		t.r.note(resp.Header)
		for _, op := range resp.Responses {
			if d := op.GetResponseDeleteRange(); d != nil {
				t.r.noteDelete(resp.Header, d.Deleted)
			}
		}
	}
	return resp, err
}

// trackedWatcher is a client's Watcher, noting the revision of each watch
// response it hands on.
type trackedWatcher struct {
	clientv3.Watcher
	r *revisions
}

// Watch forwards the real watch's responses. A response is noted just before
// it is handed on, and only while the watch's ctx lives: once the consumer
// cancels the watch it has read all it wanted, and what arrives later was
// never read.
func (w trackedWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	in := w.Watcher.Watch(ctx, key, opts...)
	out := make(chan clientv3.WatchResponse)
	go func() {
		defer close(out)
		for resp := range in {
			if ctx.Err() != nil {
				continue // drain until clientv3 closes in
			}
			w.r.note(&resp.Header)
			select {
			case out <- resp:
			case <-ctx.Done():
			}
		}
	}()
	return out
}
