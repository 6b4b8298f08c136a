package postgres

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktest/locktest/backend/postgres/pglock"
	"github.com/locktest/locktest/backend/postgres/pgserver"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/workload"
)

// pollEvery is how often the observer reads the server's locks.
const pollEvery = 20 * time.Millisecond

// observer is PostgreSQL's workload.Observer. PostgreSQL reports no event
// when a lock ends, so it polls, over a direct session (client faults do
// not blind it): pg_locks for the advisory locks of the run's keys and
// the session holding each, the lease rows with their expiry judged on the
// server's clock, and the server's log for the sessions it ended
// (idle_session_timeout). Each end of a grant it saw is recorded as a
// key-deleted event: its holder's release, the server ending its session
// ("expiry": the session was the lock's lease), the client closing its
// session ("revoke"), or a lease row expired; an end it cannot explain (a
// server crash ends every session) is recorded with no cause. A lock that
// is taken and ended between two polls (20 ms) is not seen.
type observer struct {
	s      *pgserver.Server
	grants *grants
	keys   workload.Keys
	rec    workload.Recorder
	byAkey map[int64]string // advisory key → lock name
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex // one poll at a time; guards what follows
	c       *pgx.Conn
	holders map[string]uint32     // lock name → pid holding its advisory lock
	leases  map[string]leaseState // lock name → its lease row
	ended   map[uint32]string     // pids the server ended, and why
	logPath string                // the log read: the primary's, the promoted replica's after a failover
	logPos  int64
	events  int
	err     error
}

// leaseState is a lease row as a poll saw it.
type leaseState struct {
	fence int64 // 0: no row
	ended leaseEnd
}

// leaseEnd is how a lease row's lease stands.
type leaseEnd int

const (
	leaseHeld     leaseEnd = iota // its expiry is ahead
	leaseExpired                  // its expiry passed on the server's clock
	leaseReleased                 // its holder released it (expiry -infinity)
)

// endedRE finds the server ending a silent session in its log (its
// log_line_prefix is "%m [%p] %a ").
var endedRE = regexp.MustCompile(`\[(\d+)\] .*FATAL:  terminating connection due to (idle-session|idle-in-transaction) timeout`)

func startObserver(ctx context.Context, s *pgserver.Server, gs *grants, keys workload.Keys, rec workload.Recorder) (*observer, error) {
	o := &observer{s: s, grants: gs, keys: keys, rec: rec, byAkey: map[int64]string{},
		holders: map[string]uint32{}, leases: map[string]leaseState{}, ended: map[uint32]string{}}
	for _, l := range keys.Locks {
		o.byAkey[pglock.AdvisoryKey(keys.Prefix+l)] = l
	}
	if err := o.poll(ctx); err != nil {
		return nil, fmt.Errorf("observer: %w", err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	o.cancel = cancel
	o.wg.Go(func() {
		t := time.NewTicker(pollEvery)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
				pctx, pcancel := context.WithTimeout(wctx, time.Second)
				o.poll(pctx) // a paused or crashed server: the next poll sees what changed
				pcancel()
			}
		}
	})
	return o, nil
}

// poll reads the server's locks once and records the ends it finds.
func (o *observer) poll(ctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.c == nil || o.c.IsClosed() {
		c, err := o.s.Connect(ctx)
		if err != nil {
			return err
		}
		o.c = c
	}
	o.readLog()
	holders := map[string]uint32{}
	rows, err := o.c.Query(ctx, `SELECT (classid::bigint << 32) | objid::bigint, pid FROM pg_locks
WHERE locktype = 'advisory' AND granted AND objsubid = 1`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var akey int64
		var pid uint32
		if err := rows.Scan(&akey, &pid); err != nil {
			return err
		}
		if name, ok := o.byAkey[akey]; ok {
			holders[name] = pid
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	leases := map[string]leaseState{}
	rows, err = o.c.Query(ctx, "SELECT name, fence, expires = '-infinity', expires < clock_timestamp() FROM "+pglock.LeaseTable)
	if err != nil {
		return err
	}
	for rows.Next() {
		var key string
		var l leaseState
		var released, expired bool
		if err := rows.Scan(&key, &l.fence, &released, &expired); err != nil {
			return err
		}
		switch {
		case released:
			l.ended = leaseReleased
		case expired:
			l.ended = leaseExpired
		}
		leases[key] = l
	}
	if err := rows.Err(); err != nil {
		return err
	}
	// The log again: a session whose lock is gone by now had written its
	// end before it let its locks go.
	o.readLog()
	for name, pid := range o.holders {
		if holders[name] != pid {
			o.advisoryEnded(name, pid)
		}
	}
	o.holders = holders
	for _, name := range o.keys.Locks {
		was, now := o.leases[name], leases[o.keys.Prefix+name]
		switch {
		case was.fence != 0 && now.fence != was.fence && was.ended == leaseHeld:
			// Taken over since the last poll: its end was not seen.
			o.leaseEnded(name, was.fence, leaseHeld)
		case now.fence != 0 && now.ended != leaseHeld && !(was.fence == now.fence && was.ended == now.ended):
			o.leaseEnded(name, now.fence, now.ended)
		}
		o.leases[name] = now
	}
	return nil
}

// readLog reads the server's log from where it left off, noting the
// sessions the server ended for their silence.
func (o *observer) readLog() {
	if path := o.s.LogPath(); path != o.logPath {
		o.logPath, o.logPos = path, 0
	}
	f, err := os.Open(o.logPath)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(o.logPos, io.SeekStart); err != nil {
		return
	}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return // a partial line is read again next time
		}
		o.logPos += int64(len(line))
		if m := endedRE.FindStringSubmatch(line); m != nil {
			pid, _ := strconv.ParseUint(m[1], 10, 32)
			o.ended[uint32(pid)] = m[2]
		}
	}
}

// advisoryEnded records the end of the advisory lock on name that session
// pid held.
func (o *observer) advisoryEnded(name string, pid uint32) {
	key := o.keys.Prefix + name
	g := o.grants.find(key, func(g *grant) bool { return g.pid == pid })
	if g == nil {
		return // no grant the clients learned of
	}
	params := map[string]string{}
	// The server's word first: a release under way may never have
	// reached it.
	switch why, ended := o.ended[pid]; {
	case ended:
		params["by"] = histories.DeletedByExpiry
		params["lease_alive"] = "false"
		params["ended"] = why + " timeout"
	case g.releasedItself():
		params["by"] = histories.DeletedByRelease
	case o.grants.closedOnPurpose(pid):
		params["by"] = histories.DeletedByRevoke
	}
	o.record(name, g, params)
}

// leaseEnded records the end of the lease row of name whose fence was
// fence: expired on the server's clock, released, or taken over by an
// acquire between two polls (unexplained).
func (o *observer) leaseEnded(name string, fence int64, how leaseEnd) {
	g := o.grants.find(o.keys.Prefix+name, func(g *grant) bool { return g.lease && g.token == fence })
	if g == nil {
		return
	}
	params := map[string]string{}
	switch {
	case how == leaseExpired:
		params["by"] = histories.DeletedByExpiry
		params["lease_alive"] = "false"
	case g.releasedItself():
		params["by"] = histories.DeletedByRelease
	}
	o.record(name, g, params)
}

// record records a key-deleted event of g's claim. o.mu is held.
func (o *observer) record(name string, g *grant, params map[string]string) {
	o.events++
	params["key"] = name
	params["server"] = o.s.Primary()
	params["process"] = g.process.String()
	// The contract check reads a deleted claim's token where etcd's
	// observer writes its create revision.
	params["create_revision"] = strconv.FormatInt(g.token, 10)
	op := histories.Op{Type: histories.Info, F: histories.FKeyDeleted, Process: histories.Nemesis, Key: name,
		Value: &histories.Value{Params: params, Targets: []string{g.client}}}
	if _, err := o.rec.Record(op); err != nil && o.err == nil {
		o.err = fmt.Errorf("observer: %w", err)
	}
}

// Sync polls once: every end before the call that a poll can see is then
// recorded.
func (o *observer) Sync(ctx context.Context) error {
	if err := o.poll(ctx); err != nil {
		return fmt.Errorf("observer: sync: %w", err)
	}
	return nil
}

// RecordObserved records that the history holds every end the observer
// saw; PostgreSQL has no revision to name how far, so it counts them.
func (o *observer) RecordObserved() {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, err := o.rec.Record(histories.Op{Type: histories.Info, F: histories.FObserved, Process: histories.Nemesis,
		Value: &histories.Value{Params: map[string]string{"deletions": strconv.Itoa(o.events)}}})
	if err != nil && o.err == nil {
		o.err = fmt.Errorf("observer: %w", err)
	}
}

func (o *observer) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

func (o *observer) Close() {
	o.cancel()
	o.wg.Wait()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.c != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		o.c.Close(ctx)
	}
}
