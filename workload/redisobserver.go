package workload

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/redisserver"
)

// redisObserver is Redis's Observer: it reads every data server's keyspace
// events over direct connections (client faults do not blind it) and
// records each deletion of a lock key as a key-deleted event. An "expired"
// event is the key's TTL running out on the server; a "del" is a client's
// release, its owner's or another's. The events carry no value, so a
// deletion is attributed to the newest grant of the key by what the
// clients' grants and releases tell (grantValues): Redis has no revisions
// and no create revision to tell which grant's key it was. Keys a server
// loses when it crashes produce no event.
type redisObserver struct {
	w       *Workload
	d       *redisserver.Deployment
	syncKey string
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu       sync.Mutex
	marks    []int           // per server: sync markers set
	synced   []int           // per server: sync markers seen
	changed  chan struct{}   // closed and replaced when synced advances
	recorded map[string]bool // "key/token/by" recorded (Redlock's masters each delete the key)
	events   int             // deletions seen
	err      error
}

func startRedisObserver(ctx context.Context, w *Workload, d *redisserver.Deployment) (_ *redisObserver, err error) {
	wctx, cancel := context.WithCancel(context.Background())
	n := len(d.Servers())
	o := &redisObserver{w: w, d: d, syncKey: w.cfg.Prefix + ":observer-sync", cancel: cancel,
		marks: make([]int, n), synced: make([]int, n), changed: make(chan struct{}), recorded: map[string]bool{}}
	var chans []<-chan redisserver.Event
	for i := range n {
		ch, err := d.Events(wctx, i, w.cfg.Prefix)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("workload: observer: %w", err)
		}
		chans = append(chans, ch)
	}
	for _, ch := range chans {
		o.wg.Go(func() { o.loop(ch) })
	}
	return o, nil
}

func (o *redisObserver) loop(ch <-chan redisserver.Event) {
	for ev := range ch {
		if ev.Key == o.syncKey {
			o.mu.Lock()
			o.synced[ev.Server]++
			close(o.changed)
			o.changed = make(chan struct{})
			o.mu.Unlock()
			continue
		}
		lock := strings.TrimPrefix(ev.Key, o.w.cfg.Prefix)
		if (ev.Op == "del" || ev.Op == "expired") && slices.Contains(o.w.cfg.Locks, lock) && o.master(ev.Server) {
			o.deleted(ev, lock)
		}
	}
}

// master reports whether server i is a master now. A replica's deletions
// are its master's, replayed (an expiry arrives as a "del"): only a
// master's say what happened to a lock. Only a deployment with Sentinel has
// replicas; a server that does not answer is taken for a master.
func (o *redisObserver) master(i int) bool {
	if len(o.d.Sentinels()) == 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	role, err := o.d.Servers()[i].Client().Do(ctx, "ROLE").Slice()
	return err != nil || len(role) == 0 || role[0] == "master"
}

// deleted records a deletion of a lock key, once per grant and cause.
func (o *redisObserver) deleted(ev redisserver.Event, lock string) {
	var d valueDeletion
	if ev.Op == "expired" {
		d = o.w.values.expired(ev.Key)
	} else {
		d = o.w.values.deleted(ev.Key)
	}
	if d.by == histories.DeletedByOther && len(o.d.Servers()) > 1 {
		// On independent masters a "del" may be an acquisition's own
		// cleanup: Redlock deletes its key from the masters it got when
		// it got too few. Which grant's key it was is not known, so
		// another's release is not definite.
		d.by, d.releaser = "", valueGrant{}
	}
	id := fmt.Sprintf("%s/%d/%s", ev.Key, d.owner.token, d.by)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events++
	if o.recorded[id] {
		return
	}
	o.recorded[id] = true
	params := map[string]string{"key": lock, "server": o.d.Servers()[ev.Server].Name}
	if d.by != "" {
		params["by"] = d.by
	}
	if ev.Op == "expired" {
		// The key's TTL is its lease: it ran out.
		params["lease_alive"] = "false"
	}
	v := &histories.Value{Params: params}
	if d.owner.client != "" {
		// The contract check reads a deleted key's token where etcd's
		// observer writes its create revision.
		params["create_revision"] = strconv.FormatInt(d.owner.token, 10)
		params["process"] = d.owner.process.String()
		v.Targets = []string{d.owner.client}
	}
	if d.releaser.client != "" && d.by == histories.DeletedByOther {
		params["released_by"] = d.releaser.client
		params["released_token"] = strconv.FormatInt(d.releaser.token, 10)
	}
	_, err := o.w.rec.Record(histories.Op{Type: histories.Info, F: histories.FKeyDeleted, Process: histories.Nemesis, Key: lock, Value: v})
	if err != nil && o.err == nil {
		o.err = fmt.Errorf("workload: observer: %w", err)
	}
}

// Sync sets a marker key on every master and waits until its event
// arrives: a server's keyspace events come in order over one connection,
// so every deletion before the call has been seen then.
func (o *redisObserver) Sync(ctx context.Context) error {
	for i, s := range o.d.Servers() {
		if !o.master(i) {
			continue // its events are ignored, and it takes no writes
		}
		o.mu.Lock()
		o.marks[i]++
		mark := o.marks[i]
		o.mu.Unlock()
		if err := s.Client().Set(ctx, o.syncKey, mark, 0).Err(); err != nil {
			return fmt.Errorf("workload: observer: sync with %s: %w", s.Name, err)
		}
		for {
			o.mu.Lock()
			seen, changed := o.synced[i], o.changed
			o.mu.Unlock()
			if seen >= mark {
				break
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

// RecordObserved records that the history holds every deletion the
// servers reported. Redis has no revision to name how far: the event
// counts the deletions seen instead.
func (o *redisObserver) RecordObserved() {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, err := o.w.rec.Record(histories.Op{Type: histories.Info, F: histories.FObserved, Process: histories.Nemesis,
		Value: &histories.Value{Params: map[string]string{"deletions": strconv.Itoa(o.events)}}})
	if err != nil && o.err == nil {
		o.err = fmt.Errorf("workload: observer: %w", err)
	}
}

// Err is the first error in recording.
func (o *redisObserver) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// Close stops the subscriptions.
func (o *redisObserver) Close() {
	o.cancel()
	o.wg.Wait()
}

// grantValues is what a deletion is attributed by where the server says
// only that a key was deleted (redislock.Valued): each key's newest grant,
// with the value it set, and the releases under way or just done.
type grantValues struct {
	mu        sync.Mutex
	seq       int64 // grants noted so far
	newest    map[string]valueGrant
	previous  map[string]valueGrant // the grant before the newest
	gone      map[int64]bool        // grants (seq) whose key was seen deleted
	releasing map[string][]valueRelease
}

// valueGrant is one grant of a key.
type valueGrant struct {
	value, client string
	process       histories.Process
	token         int64
	seq           int64 // the order in which grants were noted
}

type valueRelease struct {
	valueGrant
	done time.Time // zero while under way
}

// releaseGrace is how long a finished release still explains a "del": its
// event may arrive after the release's reply.
const releaseGrace = 2 * time.Second

func newGrantValues() *grantValues {
	return &grantValues{newest: map[string]valueGrant{}, previous: map[string]valueGrant{}, gone: map[int64]bool{},
		releasing: map[string][]valueRelease{}}
}

// granted notes a grant that set key, and returns it numbered: the newest
// grant is the one whose key a deletion deletes.
func (g *grantValues) granted(key string, v valueGrant) valueGrant {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seq++
	v.seq = g.seq
	if n, ok := g.newest[key]; ok {
		g.previous[key] = n
	}
	g.newest[key] = v
	return v
}

// owner is the grant whose key a deletion of key deleted: the newest
// grant's, unless the one before it has not been seen deleted yet. On one
// server a SET NX succeeds only once the key before it is gone, so that
// key's deletion comes first in the server's events; but its event may
// reach the observer after the next grant's reply reached its client. (A
// key lost in a crash, with no event, is blamed for the next deletion.)
func (g *grantValues) owner(key string) valueGrant {
	if p, ok := g.previous[key]; ok && !g.gone[p.seq] {
		return p
	}
	return g.newest[key]
}

// deletion notes that d's owner's key is gone, and returns d.
func (g *grantValues) deletion(d valueDeletion) valueDeletion {
	if d.owner.seq > 0 {
		g.gone[d.owner.seq] = true
	}
	return d
}

// release notes that v's holder is releasing key.
func (g *grantValues) release(key string, v valueGrant) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.releasing[key] = append(g.releasing[key], valueRelease{valueGrant: v})
}

// released notes that v's release of key returned.
func (g *grantValues) released(key string, v valueGrant) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, r := range g.releasing[key] {
		if r.valueGrant == v && r.done.IsZero() {
			g.releasing[key][i].done = time.Now()
		}
	}
}

// valueDeletion is who deleted a key, and whose grant's key it was.
type valueDeletion struct {
	owner, releaser valueGrant
	by              string
}

// expired attributes an expiry of key: its owner's TTL ran out.
func (g *grantValues) expired(key string) valueDeletion {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.deletion(valueDeletion{owner: g.owner(key), by: histories.DeletedByExpiry})
}

// deleted attributes a "del" of key to a release under way (or just done):
// the owner's own, or else another client's, whose grant was older: if
// that grant's key was seen deleted before, this release deleted a later
// key; if not, the key was its own, whose event came late (see owner).
// Without a release to explain it, the cause is left unsaid.
func (g *grantValues) deleted(key string) valueDeletion {
	g.mu.Lock()
	defer g.mu.Unlock()
	owner := g.owner(key)
	rs := slices.DeleteFunc(g.releasing[key], func(r valueRelease) bool {
		return !r.done.IsZero() && time.Since(r.done) > releaseGrace
	})
	g.releasing[key] = rs
	for i, r := range rs {
		if r.value == owner.value {
			g.releasing[key] = slices.Delete(rs, i, i+1)
			return g.deletion(valueDeletion{owner: owner, releaser: r.valueGrant, by: histories.DeletedByRelease})
		}
	}
	for i, r := range rs {
		if owner.client != "" && r.client != owner.client && r.seq < owner.seq {
			g.releasing[key] = slices.Delete(rs, i, i+1)
			if !g.gone[r.seq] {
				return g.deletion(valueDeletion{owner: r.valueGrant, releaser: r.valueGrant, by: histories.DeletedByRelease})
			}
			return g.deletion(valueDeletion{owner: owner, releaser: r.valueGrant, by: histories.DeletedByOther})
		}
	}
	return g.deletion(valueDeletion{owner: owner})
}
