package mysql

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/locktest/locktest/backend/mysql/mysqllock"
	"github.com/locktest/locktest/backend/mysql/mysqlserver"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/workload"
)

// pollEvery is how often the observer asks who holds each lock.
const pollEvery = 20 * time.Millisecond

// observer is MariaDB's workload.Observer. The server reports no event when
// a GET_LOCK lock ends, so it polls IS_USED_LOCK for each of the run's
// locks over a direct session (client faults do not blind it), and reads
// the server's error log for the sessions it ended for silence
// (wait_timeout). Each end of a grant it saw is recorded as a key-deleted
// event: its holder's release, the server ending its session ("expiry":
// the session was the lock's lease), the client closing it ("revoke");
// an end it cannot explain (a crash) with no cause. A lock taken and ended
// between two polls is not seen.
type observer struct {
	s      *mysqlserver.Server
	grants *grants
	keys   workload.Keys
	rec    workload.Recorder
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	db      *sql.DB
	holders map[string]int64 // lock name → connection ID holding it
	ended   map[int64]bool   // sessions the server ended for silence
	// pid is the server process the IDs are of: a restarted server
	// numbers its connections from 1 again.
	pid    int
	logPos int64
	events int
	err    error
}

// endedRE finds the server ending a silent session in its error log.
var endedRE = regexp.MustCompile(`Aborted connection (\d+) to db: .*\(Got timeout reading communication packets\)`)

func startObserver(ctx context.Context, s *mysqlserver.Server, gs *grants, keys workload.Keys, rec workload.Recorder) (*observer, error) {
	db, err := s.DB()
	if err != nil {
		return nil, fmt.Errorf("observer: %w", err)
	}
	o := &observer{s: s, grants: gs, keys: keys, rec: rec, db: db, holders: map[string]int64{}, ended: map[int64]bool{}}
	if err := o.poll(ctx); err != nil {
		db.Close()
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

func (o *observer) poll(ctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if pid := o.s.Pid(); pid != o.pid {
		// Every session of the old process ended with it (unexplained:
		// its grants' ends go unrecorded), and its IDs mean nothing now.
		o.pid, o.holders, o.ended = pid, map[string]int64{}, map[int64]bool{}
		o.readLog()
		o.ended = map[int64]bool{}
	}
	holders := map[string]int64{}
	for _, name := range o.keys.Locks {
		var id sql.NullInt64
		if err := o.db.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", mysqllock.LockName(o.keys.Prefix+name)).Scan(&id); err != nil {
			return err
		}
		if id.Valid {
			holders[name] = id.Int64
		}
	}
	// The log after the locks: a session whose lock is gone by now had
	// been ended (and logged) before.
	o.readLog()
	for name, id := range o.holders {
		if holders[name] != id {
			o.lockEnded(name, id)
		}
	}
	o.holders = holders
	return nil
}

func (o *observer) readLog() {
	f, err := os.Open(o.s.LogPath())
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
			return
		}
		o.logPos += int64(len(line))
		if m := endedRE.FindStringSubmatch(line); m != nil {
			id, _ := strconv.ParseInt(m[1], 10, 64)
			o.ended[id] = true
		}
	}
}

// lockEnded records the end of the lock on name that session id held.
// o.mu is held.
func (o *observer) lockEnded(name string, id int64) {
	g := o.grants.find(o.keys.Prefix+name, id, o.pid)
	if g == nil {
		return
	}
	params := map[string]string{"key": name, "server": mysqlserver.Name, "process": g.process.String(),
		"create_revision": strconv.FormatInt(g.token, 10)}
	switch {
	case o.ended[id]:
		params["by"] = histories.DeletedByExpiry
		params["lease_alive"] = "false"
		params["ended"] = "wait_timeout"
	case g.releasedItself():
		params["by"] = histories.DeletedByRelease
	case o.grants.closedOnPurpose(id):
		params["by"] = histories.DeletedByRevoke
	}
	o.events++
	op := histories.Op{Type: histories.Info, F: histories.FKeyDeleted, Process: histories.Nemesis, Key: name,
		Value: &histories.Value{Params: params, Targets: []string{g.client}}}
	if _, err := o.rec.Record(op); err != nil && o.err == nil {
		o.err = fmt.Errorf("observer: %w", err)
	}
}

// Sync polls once.
func (o *observer) Sync(ctx context.Context) error {
	if err := o.poll(ctx); err != nil {
		return fmt.Errorf("observer: sync: %w", err)
	}
	return nil
}

// RecordObserved records how many ends the observer saw.
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
	o.db.Close()
}
