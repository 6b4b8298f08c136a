package etcd

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/workload"
)

// observer is etcd's workload.Observer: it watches the lock keys over
// direct connections to the members (not through any client's proxies, so
// client faults do not blind it) and records every deletion of a lock key
// as a key-deleted nemesis event: the server's truth about when a holder
// lost its key, and who deleted it (deletions). It watches through every
// member, each over a client of its own, from one start revision, and
// records each deletion on its first arrival, so that one member cut off or
// stopped by the nemesis does not delay the record.
type observer struct {
	prefix   string
	rec      workload.Recorder
	del      *deletions
	admin    *clientv3.Client // all members: TimeToLive, sync
	watchers []*clientv3.Client
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu      sync.Mutex
	seen    map[string]bool // "revision/key" of deletions recorded
	rev     int64           // revision some watch has delivered up to
	changed chan struct{}   // closed and replaced when rev advances
	err     error           // first recording error
}

func startObserver(ctx context.Context, cl Cluster, del *deletions, prefix string, rec workload.Recorder) (_ *observer, err error) {
	wctx, cancel := context.WithCancel(context.Background())
	o := &observer{prefix: prefix, rec: rec, del: del, cancel: cancel, seen: map[string]bool{}, changed: make(chan struct{})}
	defer func() {
		if err != nil {
			o.Close()
			err = fmt.Errorf("observer: %w", err)
		}
	}()
	if o.admin, err = cl.DirectClient(); err != nil {
		return nil, err
	}
	gctx, gcancel := context.WithTimeout(ctx, 10*time.Second)
	defer gcancel()
	resp, err := o.admin.Get(gctx, o.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return nil, err
	}
	from := resp.Header.Revision + 1
	o.rev = resp.Header.Revision
	var chans []clientv3.WatchChan
	members := cl.MemberNames()
	for i := range members {
		cli, err := cl.DirectClient(i)
		if err != nil {
			return nil, err
		}
		o.watchers = append(o.watchers, cli)
		chans = append(chans, cli.Watch(wctx, o.prefix, clientv3.WithPrefix(), clientv3.WithPrevKV(),
			clientv3.WithRev(from), clientv3.WithCreatedNotify()))
	}
	// Wait until every watch is in place.
	for i, wch := range chans {
		select {
		case resp, ok := <-wch:
			if !ok || resp.Err() != nil {
				return nil, fmt.Errorf("watch %s via %s: %v", o.prefix, members[i], resp.Err())
			}
		case <-gctx.Done():
			return nil, fmt.Errorf("waiting for the watch via %s: %w", members[i], gctx.Err())
		}
	}
	for _, wch := range chans {
		o.wg.Go(func() { o.loop(wch) })
	}
	return o, nil
}

func (o *observer) loop(wch clientv3.WatchChan) {
	for resp := range wch {
		if resp.Err() != nil {
			continue // clientv3 re-establishes the watch; a canceled one closes wch
		}
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypeDelete {
				o.deleted(ev)
			}
		}
		o.advance(resp.Header.Revision)
	}
}

func (o *observer) advance(rev int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if rev > o.rev {
		o.rev = rev
		close(o.changed)
		o.changed = make(chan struct{})
		o.del.observedUpTo(rev)
	}
}

// deleted records the deletion of a lock key, unless another watch did.
func (o *observer) deleted(ev *clientv3.Event) {
	key := string(ev.Kv.Key)
	id := strconv.FormatInt(ev.Kv.ModRevision, 10) + "/" + key
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen[id] {
		return
	}
	o.seen[id] = true
	var (
		lease     clientv3.LeaseID
		createRev int64
	)
	rest := strings.TrimPrefix(key, o.prefix)
	lock, keyLease := rest, ""
	if i := strings.LastIndexByte(rest, '/'); i >= 0 {
		lock, keyLease = rest[:i], rest[i+1:]
	}
	if ev.PrevKv != nil {
		lease, createRev = clientv3.LeaseID(ev.PrevKv.Lease), ev.PrevKv.CreateRevision
	} else if id, err := strconv.ParseInt(keyLease, 16, 64); err == nil {
		lease = clientv3.LeaseID(id)
	}
	alive := o.leaseAlive(lease)
	o.del.awaitReleases(key, time.Second)
	d := o.del.deleted(key, createRev, ev.Kv.ModRevision, lease, alive)
	params := map[string]string{
		"key":             lock,
		"lease":           leaseHex(lease),
		"revision":        strconv.FormatInt(ev.Kv.ModRevision, 10),
		"create_revision": strconv.FormatInt(createRev, 10),
		"by":              d.by,
	}
	if alive != nil {
		params["lease_alive"] = strconv.FormatBool(*alive)
	}
	if d.releaser != "" {
		params["released_by"] = d.releaser
		params["released_token"] = strconv.FormatInt(d.released, 10)
	}
	v := &histories.Value{Params: params}
	if d.owner.client != "" {
		v.Targets = []string{d.owner.client}
		params["process"] = d.owner.process.String()
	}
	_, err := o.rec.Record(histories.Op{Type: histories.Info, F: histories.FKeyDeleted, Process: histories.Nemesis, Key: lock, Value: v})
	if err != nil && o.err == nil {
		o.err = fmt.Errorf("observer: %w", err)
	}
}

// leaseAlive asks whether lease still exists (nil if the answer does not
// come quickly). A lease that expires or is revoked takes its keys with it in
// the same step, so a key deleted while its lease lives was deleted by its
// owner.
func (o *observer) leaseAlive(lease clientv3.LeaseID) *bool {
	if lease == clientv3.NoLease {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := o.admin.TimeToLive(ctx, lease)
	if err != nil {
		return nil
	}
	alive := resp.TTL >= 0 // -1: not found
	return &alive
}

// Sync waits until the observer has seen every change made before the call;
// it returns ctx's error if ctx ends first.
func (o *observer) Sync(ctx context.Context) error {
	resp, err := o.admin.Get(ctx, o.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return err
	}
	target := resp.Header.Revision
	for {
		o.mu.Lock()
		rev, changed := o.rev, o.changed
		o.mu.Unlock()
		if rev >= target {
			return nil
		}
		// A progress notification tells a watch how far the store is.
		for _, cli := range o.watchers {
			cli.RequestProgress(ctx)
		}
		select {
		case <-changed:
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// RecordObserved records how far the observer has seen every change: each
// watch delivers events in revision order, and a deletion is recorded
// before its watch's revision advances, so every deletion at or below that
// revision is in the history.
func (o *observer) RecordObserved() {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, err := o.rec.Record(histories.Op{Type: histories.Info, F: histories.FObserved, Process: histories.Nemesis,
		Value: &histories.Value{Params: map[string]string{"revision": strconv.FormatInt(o.rev, 10)}}})
	if err != nil && o.err == nil {
		o.err = fmt.Errorf("observer: %w", err)
	}
}

// Err is the first error in recording.
func (o *observer) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// Close stops the watches.
func (o *observer) Close() {
	o.cancel()
	for _, cli := range o.watchers {
		cli.Close()
	}
	o.wg.Wait()
	if o.admin != nil {
		o.admin.Close()
	}
}
