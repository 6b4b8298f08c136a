package redis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/backend/redis/redisserver"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/workload"
)

// observer is Redis's workload.Observer: it reads every data server's keyspace
// events over direct connections (client faults do not blind it) and
// records each deletion of a lock key as a key-deleted event. An "expired"
// event is the key's TTL running out on the server; a "del" is a client's
// release, its owner's or another's. The events carry no value, so a
// deletion is attributed to the newest grant of the key by what the
// clients' grants and releases tell (grantValues): Redis has no revisions
// and no create revision to tell which grant's key it was. Keys a server
// loses when it crashes produce no event.
type observer struct {
	keys    workload.Keys
	rec     workload.Recorder
	d       *redisserver.Deployment
	values  *grantValues
	servers []string // the data servers' names, by index
	syncKey string
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu       sync.Mutex
	marks    []int           // per server: sync markers set
	synced   []int           // per server: sync markers seen
	changed  chan struct{}   // closed and replaced when synced advances
	recorded map[string]bool // "key/token/by" and "key/token" recorded (Redlock's masters each delete the key)
	events   int             // deletions seen
	err      error

	// On one server: the commands it took on the lock keys (nil
	// elsewhere).
	cmds *commandLog
}

func startObserver(ctx context.Context, d *redisserver.Deployment, values *grantValues, keys workload.Keys, rec workload.Recorder) (_ *observer, err error) {
	wctx, cancel := context.WithCancel(context.Background())
	n := len(d.Servers())
	var names []string
	for _, s := range d.Servers() {
		names = append(names, s.Name)
	}
	o := &observer{keys: keys, rec: rec, d: d, values: values, servers: names, syncKey: keys.Prefix + ":observer-sync", cancel: cancel,
		marks: make([]int, n), synced: make([]int, n), changed: make(chan struct{}), recorded: map[string]bool{}}
	switch {
	case n > 1 && len(d.Sentinels()) == 0:
		values.setLocate(o.locate)
	case n == 1:
		values.setKept(o.kept)
		if o.cmds, err = startCommandLog(wctx, d, keys.Prefix, o.syncKey, &o.wg); err != nil {
			cancel()
			o.wg.Wait()
			return nil, err
		}
	}
	var chans []<-chan redisserver.Event
	for i := range n {
		ch, err := d.Events(wctx, i, keys.Prefix)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("observer: %w", err)
		}
		chans = append(chans, ch)
	}
	for _, ch := range chans {
		o.wg.Go(func() { o.loop(ch) })
	}
	return o, nil
}

func (o *observer) loop(ch <-chan redisserver.Event) {
	for ev := range ch {
		if ev.Key == o.syncKey {
			o.mu.Lock()
			o.synced[ev.Server]++
			close(o.changed)
			o.changed = make(chan struct{})
			o.mu.Unlock()
			continue
		}
		lock := strings.TrimPrefix(ev.Key, o.keys.Prefix)
		if (ev.Op == "del" || ev.Op == "expired") && slices.Contains(o.keys.Locks, lock) && o.master(ev.Server) {
			o.deleted(ev, lock)
		}
	}
}

// master reports whether server i is a master now. A replica's deletions
// are its master's, replayed (an expiry arrives as a "del"): only a
// master's say what happened to a lock. Only a deployment with Sentinel has
// replicas; a server that does not answer is taken for a master.
func (o *observer) master(i int) bool {
	if len(o.d.Sentinels()) == 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	role, err := o.d.Servers()[i].Client().Do(ctx, "ROLE").Slice()
	return err != nil || len(role) == 0 || role[0] == "master"
}

// deleted records a deletion of a lock key, once per grant and cause.
func (o *observer) deleted(ev redisserver.Event, lock string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events++
	op, ok := o.deletion(ev, lock)
	if !ok {
		return
	}
	if _, err := o.rec.Record(op); err != nil && o.err == nil {
		o.err = fmt.Errorf("observer: %w", err)
	}
}

// locateWait bounds locate's reads: a paused master does not answer, and
// the grant waits for them.
const locateWait = 50 * time.Millisecond

// locate returns the masters that hold value at key, read over direct
// connections right after the grant, with the process of each that holds
// it: on independent masters a grant's key is on some of them only, a
// master that missed a release keeps an older grant's key, and one that
// restarts has lost it.
func (o *observer) locate(key, value string) []serverProcess {
	ctx, cancel := context.WithTimeout(context.Background(), locateWait)
	defer cancel()
	var (
		mu sync.Mutex
		on []serverProcess
		wg sync.WaitGroup
	)
	for i, s := range o.d.Servers() {
		wg.Go(func() {
			pid := s.Pid()
			if v, err := s.Client().Get(ctx, key).Result(); err == nil && v == value && s.Pid() == pid {
				mu.Lock()
				on = append(on, serverProcess{i, pid})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(on, func(a, b serverProcess) int { return a.server - b.server })
	return on
}

// keptWait bounds kept's sync and read: a paused server does not answer,
// and the client waits for them.
const keptWait = 200 * time.Millisecond

// kept records a key-kept event when the one server (no replica: its
// answer is the lock's state) still holds v's value at key right after
// the release of v's grant returned ok: the release did not take effect.
// Each grant sets a value of its own, and one deleted never comes back
// (the servers keep no data across a restart), so the value there is that
// grant's claim, untouched by its release. The value of a grant that tells
// its key only was read after its grant, and is the next grant's if its
// key was gone by then: so v is judged only once every deletion before the
// release returned has been seen (Sync), none of them its key's, and no
// other grant of the key noted the same value. A sync or read that fails,
// or that a restart of the server crossed, says nothing.
func (o *observer) kept(key string, v valueGrant) {
	ctx, cancel := context.WithTimeout(context.Background(), keptWait)
	defer cancel()
	s := o.d.Servers()[0]
	pid := s.Pid()
	if o.Sync(ctx) != nil || !o.values.sole(key, v) {
		return
	}
	got, err := s.Client().Get(ctx, key).Result()
	if err != nil || got != v.value || s.Pid() != pid {
		return
	}
	lock := strings.TrimPrefix(key, o.keys.Prefix)
	params := map[string]string{"key": lock, "process": v.process.String(), "server": o.servers[0]}
	o.mu.Lock()
	defer o.mu.Unlock()
	op := histories.Op{Type: histories.Info, F: histories.FKeyKept, Process: histories.Nemesis, Key: lock,
		Value: &histories.Value{Targets: []string{v.client}, Params: params}}
	if _, err := o.rec.Record(op); err != nil && o.err == nil {
		o.err = fmt.Errorf("observer: %w", err)
	}
}

// serverProcess is a server, by index, and the ID of its process then.
type serverProcess struct{ server, pid int }

// deletion is the key-deleted event that records ev, a deletion of lock's
// key, attributed by o.values; false when that grant's deletion by that
// cause is recorded already (Redlock's masters each delete the key), or
// when on independent masters the key was no grant's located there (an
// acquisition's that got too few masters, or a grant's its locate missed).
// o.mu is held.
func (o *observer) deletion(ev redisserver.Event, lock string) (histories.Op, bool) {
	var d valueDeletion
	switch {
	case len(o.servers) > 1:
		var ok bool
		if d, ok = o.values.deletedOn(ev.Key, serverProcess{ev.Server, o.d.Servers()[ev.Server].Pid()}, ev.Op == "expired"); !ok {
			return histories.Op{}, false
		}
	case ev.Op == "expired":
		d = o.values.expired(ev.Key)
	default:
		d = o.values.deleted(ev.Key)
	}
	return o.deletionOf(d, ev, lock)
}

// deletionOf is the key-deleted event of ev attributed as d; false when
// it is recorded already. o.mu is held.
func (o *observer) deletionOf(d valueDeletion, ev redisserver.Event, lock string) (histories.Op, bool) {
	// A release matches one deletion of its key, the first master's; the
	// other masters' deletions of that key then have no cause, and say
	// nothing the first did not.
	grant := fmt.Sprintf("%s/%d/%d", ev.Key, d.owner.token, d.owner.seq)
	id := grant + "/" + d.by
	if o.recorded[id] || d.by == "" && o.recorded[grant] {
		return histories.Op{}, false
	}
	o.recorded[id], o.recorded[grant] = true, true
	params := map[string]string{"key": lock, "server": o.servers[ev.Server]}
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
		if !d.owner.untokened {
			params["create_revision"] = strconv.FormatInt(d.owner.token, 10)
		}
		params["process"] = d.owner.process.String()
		v.Targets = []string{d.owner.client}
	}
	if d.releaser.client != "" && d.by == histories.DeletedByOther {
		params["released_by"] = d.releaser.client
		if !d.releaser.untokened {
			params["released_token"] = strconv.FormatInt(d.releaser.token, 10)
		}
	}
	return histories.Op{Type: histories.Info, F: histories.FKeyDeleted, Process: histories.Nemesis, Key: lock, Value: v}, true
}

// Sync sets a marker key on every master and waits until its event
// arrives: a server's keyspace events come in order over one connection,
// so every deletion before the call has been seen then.
func (o *observer) Sync(ctx context.Context) error {
	for i, s := range o.d.Servers() {
		if !o.master(i) {
			continue // its events are ignored, and it takes no writes
		}
		o.mu.Lock()
		o.marks[i]++
		mark := o.marks[i]
		o.mu.Unlock()
		if err := s.Client().Set(ctx, o.syncKey, mark, 0).Err(); err != nil {
			return fmt.Errorf("observer: sync with %s: %w", s.Name, err)
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
func (o *observer) RecordObserved() {
	o.recordSets()
	o.mu.Lock()
	defer o.mu.Unlock()
	_, err := o.rec.Record(histories.Op{Type: histories.Info, F: histories.FObserved, Process: histories.Nemesis,
		Value: &histories.Value{Params: map[string]string{"deletions": strconv.Itoa(o.events)}}})
	if err != nil && o.err == nil {
		o.err = fmt.Errorf("observer: %w", err)
	}
}

// recordSets records a key-set event of each grant noted whose key's
// set the server's commands show, once the command log has caught up with
// a marker set now (the clients have stopped), when the recorder places
// the server's times in the history.
func (o *observer) recordSets() {
	tl, ok := o.rec.(workload.Timeline)
	if o.cmds == nil || !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmdsWait)
	defer cancel()
	o.mu.Lock()
	o.marks[0]++ // the keyspace events count it too
	mark := o.marks[0]
	o.mu.Unlock()
	if o.d.Servers()[0].Client().Set(ctx, o.syncKey, mark, 0).Err() != nil || o.cmds.await(ctx, mark) != nil {
		return // without every command, no key-set event
	}
	for _, g := range o.values.grants() {
		op, ok := o.cmds.keySet(g, strings.TrimPrefix(g.key, o.keys.Prefix), o.servers[0], tl)
		if !ok {
			continue
		}
		o.mu.Lock()
		if _, err := o.rec.Record(op); err != nil && o.err == nil {
			o.err = fmt.Errorf("observer: %w", err)
		}
		o.mu.Unlock()
	}
}

// cmdsWait bounds the wait for the command log to catch up at the end.
const cmdsWait = 5 * time.Second

// Err is the first error in recording.
func (o *observer) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// Close stops the subscriptions.
func (o *observer) Close() {
	o.cancel()
	o.wg.Wait()
}

// grantValues is what a deletion is attributed by where the server says
// only that a key was deleted (redislock.Valued, noted by the clients'
// connections): each key's newest grant,
// with the value it set, and the releases under way or just done.
type grantValues struct {
	mu        sync.Mutex
	seq       int64 // grants noted so far
	newest    map[string]valueGrant
	previous  map[string]valueGrant // the grant before the newest
	gone      map[int64]bool        // grants (seq) whose key was seen deleted
	noted     []notedGrant          // every grant, in the order noted
	releasing map[string][]valueRelease

	// On independent masters (setLocate): locate finds the masters that
	// hold a grant's value; located lists, by key and master, the grants
	// whose key is there, oldest first, with the master's process then.
	locate  func(key, value string) []serverProcess
	located map[string]map[int][]locatedGrant

	// On one server (setKept): kept reads the key after a release that
	// returned ok, and records it if the release did not take effect.
	kept func(key string, v valueGrant)
}

type locatedGrant struct {
	valueGrant
	pid int
}

// valueGrant is one grant of a key.
type valueGrant struct {
	value, client string
	process       histories.Process
	token         int64
	untokened     bool  // the grant carried no token (lock.Untokened)
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

// setLocate has every grant located on the masters as it is noted.
func (g *grantValues) setLocate(locate func(key, value string) []serverProcess) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.locate, g.located = locate, map[string]map[int][]locatedGrant{}
}

// setKept has every release that returned ok checked by kept.
func (g *grantValues) setKept(kept func(key string, v valueGrant)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.kept = kept
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
	g.noted = append(g.noted, notedGrant{key, v})
	if g.locate == nil {
		return v
	}
	locate := g.locate
	g.mu.Unlock()
	on := locate(key, v.value)
	g.mu.Lock()
	if g.located[key] == nil {
		g.located[key] = map[int][]locatedGrant{}
	}
	for _, at := range on {
		g.located[key][at.server] = append(g.located[key][at.server], locatedGrant{v, at.pid})
	}
	return v
}

// grants are the grants noted so far.
func (g *grantValues) grants() []notedGrant {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.noted)
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

// released notes that v's release of key returned, ok when err is nil;
// an ok one is checked (setKept).
func (g *grantValues) released(key string, v valueGrant, err error) {
	g.mu.Lock()
	for i, r := range g.releasing[key] {
		if r.valueGrant == v && r.done.IsZero() {
			g.releasing[key][i].done = time.Now()
		}
	}
	kept := g.kept
	g.mu.Unlock()
	if kept != nil && err == nil {
		kept(key, v)
	}
}

// sole reports that v's key was not seen deleted and that no other grant
// of key the observer keeps (the newest, and the one before it) noted
// v's value.
func (g *grantValues) sole(key string, v valueGrant) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, o := range []valueGrant{g.newest[key], g.previous[key]} {
		if o.seq != v.seq && o.value == v.value {
			return false
		}
	}
	return !g.gone[v.seq]
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

// releases are the releases of key under way or done within releaseGrace;
// older ones are dropped. g.mu is held.
func (g *grantValues) releases(key string) []valueRelease {
	g.releasing[key] = slices.DeleteFunc(g.releasing[key], func(r valueRelease) bool {
		return !r.done.IsZero() && time.Since(r.done) > releaseGrace
	})
	return g.releasing[key]
}

// deletedOn attributes a deletion of key on master at.server, whose
// process is at.pid (independent masters): on one master a key is set only
// once the one before it is gone, so it is the oldest grant located there,
// in that process, not yet deleted there; a "del" of it is its own
// release's if one is under way or just done (Redlock's release and
// clean-up delete only their own value), else its cause is unsaid. False
// when no grant is located there.
func (g *grantValues) deletedOn(key string, at serverProcess, expired bool) (valueDeletion, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	// Keys located in an earlier process of the master died with it.
	l := slices.DeleteFunc(g.located[key][at.server], func(lg locatedGrant) bool { return lg.pid != at.pid })
	if len(l) == 0 {
		return valueDeletion{}, false
	}
	owner := l[0].valueGrant
	g.located[key][at.server] = l[1:]
	if expired {
		return g.deletion(valueDeletion{owner: owner, by: histories.DeletedByExpiry}), true
	}
	for _, r := range g.releases(key) {
		if r.valueGrant == owner {
			return g.deletion(valueDeletion{owner: owner, releaser: r.valueGrant, by: histories.DeletedByRelease}), true
		}
	}
	return g.deletion(valueDeletion{owner: owner}), true
}

// deleted attributes a "del" of key to a release under way (or just done):
// the owner's own, or else another client's, whose grant was older: if
// that grant's key was seen deleted before, this release deleted a later
// key; if not, the key was its own, whose event came late (see owner).
// The owner's own release is looked for under both grants the key may
// still have been (the newest, and the one before it not seen deleted):
// attribution by order alone slips by one grant when an event is late.
// When the owner's own release and another's late release could each
// have deleted the key, the cause is left unsaid: the event carries no
// value to tell which. Without a release to explain it, it is unsaid too.
func (g *grantValues) deleted(key string) valueDeletion {
	g.mu.Lock()
	defer g.mu.Unlock()
	owner := g.owner(key)
	candidates := []valueGrant{owner, g.newest[key]}
	rs := g.releases(key)
	own, ownOf := -1, owner
	for i, r := range rs {
		if j := slices.IndexFunc(candidates, func(c valueGrant) bool { return c.value == r.value }); j >= 0 {
			own, ownOf = i, candidates[j]
			break
		}
	}
	other := slices.IndexFunc(rs, func(r valueRelease) bool {
		return owner.client != "" && r.client != owner.client && r.seq < owner.seq
	})
	switch {
	case own >= 0 && other >= 0 && g.gone[rs[other].seq]:
		g.releasing[key] = slices.Delete(rs, own, own+1)
		return g.deletion(valueDeletion{owner: ownOf})
	case own >= 0:
		r := rs[own]
		g.releasing[key] = slices.Delete(rs, own, own+1)
		return g.deletion(valueDeletion{owner: ownOf, releaser: r.valueGrant, by: histories.DeletedByRelease})
	case other >= 0:
		r := rs[other]
		g.releasing[key] = slices.Delete(rs, other, other+1)
		if !g.gone[r.seq] {
			return g.deletion(valueDeletion{owner: r.valueGrant, releaser: r.valueGrant, by: histories.DeletedByRelease})
		}
		return g.deletion(valueDeletion{owner: owner, releaser: r.valueGrant, by: histories.DeletedByOther})
	}
	return g.deletion(valueDeletion{owner: owner})
}
