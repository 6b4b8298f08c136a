package zookeeper

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locktest/locktest/backend/zookeeper/txnlog"
	"github.com/locktest/locktest/backend/zookeeper/zklock"
	"github.com/locktest/locktest/backend/zookeeper/zkserver"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/workload"
)

// observer is ZooKeeper's workload.Observer. Its truth is the servers'
// transaction logs, which it tails from outside every client's links: each
// znode's creation (its zxid, the fencing token, and its session, the
// owner), and each deletion with its zxid and cause: a delete by the
// owner's session (its release, or its clean-up after a failed wait), by
// another session (another client's release), or a closeSession that
// listed it (its session expired on the servers when the leader wrote it,
// cxid 0, or its client closed it). Watch events carry neither the zxid nor
// the cause.
//
// A follower logs a proposal before it is committed, and one that never
// is may be truncated later: a transaction is trusted once a majority of
// the servers have logged it (then ZAB commits it). A commit needs a
// majority's logs, so every transaction committed before a pass over the
// logs began is trusted after it: Sync writes a marker and waits for a
// pass begun after it was written.
type observer struct {
	prefix   string
	locks    map[string]bool
	rec      workload.Recorder
	notes    *notes
	tails    []*txnlog.Tailer
	majority int
	servers  []string // the servers' client addresses, past every client's links
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	// marker is the session Sync writes the marker on, nil until made;
	// markerHeld (one slot) is held while it is looked at or made.
	marker     *zklock.Session
	markerHeld chan struct{}

	// Of the poll loop only.
	pending map[int64]*logged // zxid: not yet trusted, or trusted and not yet read from every server
	read    []int64           // per server, the highest zxid read from its log
	settled int64             // every zxid up to it is applied or never committed
	nodes   map[string]node   // lock nodes created, by path

	mu       sync.Mutex
	begun    int64              // passes over the logs begun
	done     int64              // and completed
	passed   chan struct{}      // closed and replaced as each pass completes
	trusted  int64              // the highest trusted zxid
	observed int64              // every deletion up to it is recorded
	queues   map[string][]int64 // each lock's nodes' owners, oldest first, as of the last pass
	err      error
}

// logged is a transaction as the servers' logs hold it.
type logged struct {
	txn     txnlog.Txn
	servers uint64 // bit i: server i logged it
	applied bool
}

// node is a lock node's creation, and since when it heads its lock's
// queue.
type node struct {
	czxid, owner int64
	// heads says it heads its lock's queue, every older node gone;
	// headSince is the zxid of the deletion after which it did at the
	// latest (0: none, as for a node that headed the queue when created).
	heads     bool
	headSince int64
}

// markerPath is the node Sync writes to; no lock's.
const markerPath = "/locktest-observer"

// pollEvery is how often the observer reads the logs' new records.
const pollEvery = 5 * time.Millisecond

// startObserver starts the observer. It needs no server up: it reads the
// logs from disk, and its marker's session is made in the background and
// again whenever it is lost (a follower that loses its leader under load
// drops its clients, and a pending create fails with "zk: connection
// closed": that ended runs at their start; an outage past the session's
// timeout expires it).
func startObserver(e *zkserver.Ensemble, n *notes, prefix string, locks []string, rec workload.Recorder) *observer {
	servers := e.Servers()
	o := &observer{prefix: prefix, locks: map[string]bool{}, rec: rec, notes: n, majority: len(servers)/2 + 1,
		servers: e.ClientAddrs(), markerHeld: make(chan struct{}, 1),
		pending: map[int64]*logged{}, read: make([]int64, len(servers)), nodes: map[string]node{}, passed: make(chan struct{})}
	for _, l := range locks {
		o.locks[l] = true
	}
	for _, s := range servers {
		o.tails = append(o.tails, txnlog.NewTailer(s.TxnLogDir()))
	}
	lctx, cancel := context.WithCancel(context.Background())
	o.cancel = cancel
	o.wg.Go(func() { o.loop(lctx) })
	o.wg.Go(func() {
		for lctx.Err() == nil {
			if _, err := o.markerSession(lctx); err == nil {
				return
			}
			select {
			case <-lctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	return o
}

// markerSession is a live session on which the marker node exists, made
// (session and node) if there is none, or if the last one was lost.
func (o *observer) markerSession(ctx context.Context) (*zklock.Session, error) {
	select {
	case o.markerHeld <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-o.markerHeld }()
	if o.marker != nil {
		select {
		case <-o.marker.Done():
			o.marker.Close()
			o.marker = nil
		default:
			return o.marker, nil
		}
	}
	s, err := (&zklock.Client{Servers: o.servers}).Connect(ctx, 10*time.Second)
	if err != nil {
		return nil, err
	}
	if _, err := s.Conn.Create(markerPath, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		s.Close()
		return nil, err
	}
	o.marker = s
	return s, nil
}

func (o *observer) loop(ctx context.Context) {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		o.pass()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pass reads what every server logged since the last pass, and applies
// the transactions trusted meanwhile, in zxid order.
func (o *observer) pass() {
	o.mu.Lock()
	o.begun++
	o.mu.Unlock()
	var fresh []*logged
	for i, t := range o.tails {
		txns, err := t.Poll()
		if err != nil {
			o.fail(fmt.Errorf("reading %s's transaction log: %w", "zk"+strconv.Itoa(i+1), err))
		}
		for _, tx := range txns {
			o.read[i] = max(o.read[i], tx.Zxid)
			if tx.Zxid <= o.settled {
				continue // logged again by a restarted server
			}
			l := o.pending[tx.Zxid]
			if l == nil {
				l = &logged{txn: tx}
				o.pending[tx.Zxid] = l
			}
			if l.servers&(1<<i) != 0 {
				continue // logged again by a restarted server
			}
			l.servers |= 1 << i
			if !l.applied && bits.OnesCount64(l.servers) >= o.majority {
				l.applied = true
				fresh = append(fresh, l)
			}
		}
	}
	slices.SortFunc(fresh, func(a, b *logged) int { return cmp.Compare(a.txn.Zxid, b.txn.Zxid) })
	for _, l := range fresh {
		o.apply(l.txn)
	}
	// What every server has read past is settled: trusted and applied, or
	// never committed.
	o.settled = max(o.settled, slices.Min(o.read))
	for z := range o.pending {
		if z <= o.settled {
			delete(o.pending, z)
		}
	}
	var queues map[string][]int64
	if len(fresh) > 0 {
		queues = o.lockQueues()
	}
	o.mu.Lock()
	if len(fresh) > 0 {
		o.trusted = max(o.trusted, fresh[len(fresh)-1].txn.Zxid)
		o.queues = queues
	}
	o.done++
	close(o.passed)
	o.passed = make(chan struct{})
	o.mu.Unlock()
}

// apply takes in a trusted transaction.
func (o *observer) apply(tx txnlog.Txn) {
	switch tx.Type {
	case txnlog.TypeCreate, txnlog.TypeCreate2:
		if lock, _, ok := o.lockNode(tx.Path); ok {
			n := node{czxid: tx.Zxid, owner: tx.Session, heads: true}
			for p, m := range o.nodes {
				if l, _, _ := o.lockNode(p); l != lock {
					continue
				}
				if m.czxid < tx.Zxid {
					n.heads = false
				} else {
					// Trusted after younger nodes of its lock: none of
					// them headed the queue while it was there.
					m.heads, m.headSince = false, 0
					o.nodes[p] = m
				}
			}
			if o.pendingCreateBefore(tx.Zxid, lock) {
				n.heads = false
			}
			o.nodes[tx.Path] = n
		}
	case txnlog.TypeDelete:
		if lock, child, ok := o.lockNode(tx.Path); ok {
			o.deleted(tx, tx.Path, lock, child)
		}
	case txnlog.TypeCloseSession:
		for _, p := range tx.Deleted {
			if lock, child, ok := o.lockNode(p); ok {
				o.deleted(tx, p, lock, child)
			}
		}
	case txnlog.TypeMulti:
		for _, op := range tx.Ops {
			o.apply(op)
		}
	}
}

// lockNode says whether path is a child of a run's lock node, and names
// the lock and the child.
func (o *observer) lockNode(path string) (lock, child string, ok bool) {
	rest, ok := strings.CutPrefix(path, o.prefix)
	if !ok {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 || !o.locks[rest[:i]] {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

// deleted records the deletion of lock node path by tx.
func (o *observer) deleted(tx txnlog.Txn, path, lock, child string) {
	n, known := o.nodes[path]
	delete(o.nodes, path)
	params := map[string]string{
		"key":      lock,
		"node":     child,
		"revision": strconv.FormatInt(tx.Zxid, 10),
	}
	var by string
	switch {
	case tx.Type == txnlog.TypeCloseSession:
		n.owner = tx.Session
		by = histories.DeletedByRevoke
		if tx.Expired() {
			by = histories.DeletedByExpiry
		}
		// Its session is gone: the close deleted its ephemerals with it.
		params["lease_alive"] = "false"
	case known && tx.Session == n.owner && o.notes.wasGranted(path):
		by = histories.DeletedByRelease
		params["lease_alive"] = "true"
	case known && tx.Session == n.owner:
		by = histories.DeletedByAcquire // an Acquire that gave up
		params["lease_alive"] = "true"
		if head, h, ok := o.headOwn(tx, lock, n); ok {
			params["head_own"], params["head_own_revision"] = head, strconv.FormatInt(h.czxid, 10)
		}
	case known && o.notes.of(tx.Session).client == "":
		// A session no client was seen on: a library may make a new
		// session of its own (Curator does, once it has declared the old
		// one expired) and delete its old node from it. Which client
		// deleted it is not known: the cause is left unsaid.
		params["lease_alive"] = "true"
	case known && o.notes.of(tx.Session).client == o.notes.of(n.owner).client:
		// The owner's client, from a later session of its own.
		by = histories.DeletedByAcquire
		if o.notes.wasGranted(path) {
			by = histories.DeletedByRelease
		}
		params["lease_alive"] = "true"
	case known:
		// Definite: the servers say which session deleted it, another
		// client's, and the owner's was alive (its ephemeral was there).
		by = histories.DeletedByOther
		params["lease_alive"] = "true"
		params["released_by"] = o.notes.of(tx.Session).client
		if tok := o.notes.releasingToken(tx.Session); tok != 0 {
			params["released_token"] = strconv.FormatInt(tok, 10)
		}
	}
	params["by"] = by
	if n.czxid != 0 {
		params["create_revision"] = strconv.FormatInt(n.czxid, 10)
	}
	if n.heads && n.headSince != 0 {
		params["head_since"] = strconv.FormatInt(n.headSince, 10)
	}
	o.newHead(tx, lock)
	v := &histories.Value{Params: params}
	if n.owner != 0 {
		params["lease"] = sessionHex(n.owner)
		if who := o.notes.of(n.owner); who.client != "" {
			v.Targets = []string{who.client}
			params["process"] = who.process.String()
		}
	}
	if _, err := o.rec.Record(histories.Op{Type: histories.Info, F: histories.FKeyDeleted, Process: histories.Nemesis, Key: lock, Value: v}); err != nil {
		o.fail(err)
	}
}

// headOwn names the head of lock's queue when the session that made tx
// deletes its own node n, never granted, after its acquire gave up, if that
// head is another node of the same session, older than n and never
// granted: the client gave up waiting behind its own node, a node it did
// not know it had (ZOOKEEPER-1262's ghost, kazoo#732's orphan). The queue
// is the lock's children in creation order (a sequential child's number
// follows its parent's creations). Not told when a creation of a child of
// the lock before tx is logged but not yet trusted: the head may be one
// the observer has not taken in yet.
func (o *observer) headOwn(tx txnlog.Txn, lock string, n node) (string, node, bool) {
	var head string
	var h node
	for p, c := range o.nodes {
		if l, _, ok := o.lockNode(p); ok && l == lock && (head == "" || c.czxid < h.czxid) {
			head, h = p, c
		}
	}
	if head == "" || h.owner != tx.Session || h.czxid >= n.czxid || o.notes.wasGranted(head) {
		return "", node{}, false
	}
	for z, l := range o.pending {
		if z < tx.Zxid && !l.applied && o.createsIn(l.txn, lock) {
			return "", node{}, false
		}
	}
	return head[strings.LastIndexByte(head, '/')+1:], h, true
}

// newHead notes, after tx deleted a node of lock, that the node now
// heading the lock's queue heads it since this deletion, if it did not
// before. Not when a creation in the lock before that node is logged but
// not yet trusted (an older node may be there still): a later deletion
// then says it, later than it may have been, never earlier.
func (o *observer) newHead(tx txnlog.Txn, lock string) {
	var head string
	var h node
	for p, c := range o.nodes {
		if l, _, ok := o.lockNode(p); ok && l == lock && (head == "" || c.czxid < h.czxid) {
			head, h = p, c
		}
	}
	if head == "" || h.heads || o.pendingCreateBefore(h.czxid, lock) {
		return
	}
	h.heads, h.headSince = true, tx.Zxid
	o.nodes[head] = h
}

// pendingCreateBefore says whether a creation of a child of lock before
// zxid is logged but not yet trusted.
func (o *observer) pendingCreateBefore(zxid int64, lock string) bool {
	for z, l := range o.pending {
		if z < zxid && !l.applied && o.createsIn(l.txn, lock) {
			return true
		}
	}
	return false
}

// lockQueues are the owners of each lock's nodes, oldest first.
func (o *observer) lockQueues() map[string][]int64 {
	type entry struct{ czxid, owner int64 }
	by := map[string][]entry{}
	for p, n := range o.nodes {
		if l, _, ok := o.lockNode(p); ok {
			by[l] = append(by[l], entry{n.czxid, n.owner})
		}
	}
	out := map[string][]int64{}
	for l, es := range by {
		slices.SortFunc(es, func(a, b entry) int { return cmp.Compare(a.czxid, b.czxid) })
		for _, e := range es {
			out[l] = append(out[l], e.owner)
		}
	}
	return out
}

// Queue is workload.Queuer's: the clients whose nodes are in lock's queue,
// oldest first, as of the last pass over the logs ("" for a session no
// client was seen on).
func (o *observer) Queue(lock string) []string {
	o.mu.Lock()
	owners := o.queues[lock]
	o.mu.Unlock()
	out := make([]string, len(owners))
	for i, s := range owners {
		out[i] = o.notes.of(s).client
	}
	return out
}

// createsIn says whether tx creates a child of lock.
func (o *observer) createsIn(tx txnlog.Txn, lock string) bool {
	switch tx.Type {
	case txnlog.TypeCreate, txnlog.TypeCreate2:
		l, _, ok := o.lockNode(tx.Path)
		return ok && l == lock
	case txnlog.TypeMulti:
		return slices.ContainsFunc(tx.Ops, func(op txnlog.Txn) bool { return o.createsIn(op, lock) })
	}
	return false
}

func (o *observer) fail(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err == nil {
		o.err = fmt.Errorf("observer: %w", err)
	}
}

// Sync waits until the observer has taken in every change committed
// before the call: it writes the marker, and waits for a pass over the
// logs begun after the write returned, and for the marker to be trusted.
func (o *observer) Sync(ctx context.Context) error {
	var target int64
	for {
		m, err := o.markerSession(ctx)
		if err == nil {
			var st *zk.Stat
			if st, err = m.Conn.Set(markerPath, nil, -1); err == nil {
				target = st.Mzxid
				break
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("observer: writing its marker: %w (%w)", ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	o.mu.Lock()
	want := o.begun + 1
	o.mu.Unlock()
	for {
		o.mu.Lock()
		done, trusted, passed := o.done, o.trusted, o.passed
		if done >= want && trusted >= target {
			o.observed = max(o.observed, target)
			o.mu.Unlock()
			return nil
		}
		o.mu.Unlock()
		select {
		case <-passed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// RecordObserved records how far the observer has taken every change in:
// every deletion up to the zxid Sync last reached is in the history.
func (o *observer) RecordObserved() {
	o.mu.Lock()
	observed := o.observed
	o.mu.Unlock()
	_, err := o.rec.Record(histories.Op{Type: histories.Info, F: histories.FObserved, Process: histories.Nemesis,
		Value: &histories.Value{Params: map[string]string{"revision": strconv.FormatInt(observed, 10)}}})
	if err != nil {
		o.fail(err)
	}
}

// Err is the first error in recording.
func (o *observer) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// Close stops the tails.
func (o *observer) Close() {
	if o.cancel != nil {
		o.cancel()
	}
	o.wg.Wait()
	for _, t := range o.tails {
		t.Close()
	}
	o.markerHeld <- struct{}{}
	if o.marker != nil {
		o.marker.Close()
		o.marker = nil
	}
	<-o.markerHeld
}
