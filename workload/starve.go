package workload

import (
	"strconv"
	"time"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/proc"
)

// The starvation watcher reads, every starveTick, how long each lock
// process's threads waited on a run queue, and records it from
// starveMin.
const (
	starveTick = time.Second
	starveMin  = 10 * time.Millisecond
)

// pider is a Locker whose lock runs in an operating system process of its
// own (package execlock's).
type pider interface{ Pid() int }

// watchStarvation records a starved event each starveTick for each client
// whose lock runs in a process of its own a thread of which waited on a
// run queue for starveMin or more since the last look: a loaded machine that
// does not run the lock's process makes a correct lock slow, which the
// liveness check must not call stuck. It returns when stop is closed.
func watchStarvation(rec Recorder, clients []*client, stop <-chan struct{}) {
	t := time.NewTicker(starveTick)
	defer t.Stop()
	s := starvation{rec: rec, last: map[string]lockProcess{}}
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		for _, c := range clients {
			c.mu.Lock()
			l, p := c.locker, c.process
			c.mu.Unlock()
			pid := 0
			if l != nil {
				if pr, ok := l.Locker.(pider); ok {
					pid = pr.Pid()
				}
			}
			s.look(c.name, p, pid)
		}
	}
}

// starvation is what the watcher last read of each client's lock process.
type starvation struct {
	rec  Recorder
	last map[string]lockProcess // by client
}

type lockProcess struct {
	pid    int
	delays map[int]int64 // by thread
	at     time.Time
}

// look reads how long the threads of client's lock process pid (0: none)
// waited on a run queue, and records a starved event for the time since
// the last look at the same process if one of them waited starveMin or
// more (capped at that time). A process is first read as a baseline: what
// it waited before is not counted.
func (s *starvation) look(client string, p histories.Process, pid int) {
	was := s.last[client]
	delete(s.last, client)
	if pid == 0 {
		return
	}
	delays, err := proc.RunDelays(pid)
	now := time.Now()
	if err != nil {
		return
	}
	s.last[client] = lockProcess{pid: pid, delays: delays, at: now}
	if was.pid != pid {
		return
	}
	// The longest any one thread waited: the process was starved at
	// least that long (its threads' waits may overlap or not, and a sum
	// would count one stretch of the machine's once per thread).
	var waited int64
	for tid, d := range delays {
		waited = max(waited, d-was.delays[tid]) // a thread new since: all its wait is since
	}
	span := now.Sub(was.at)
	if d := min(time.Duration(waited), span); d >= starveMin {
		s.rec.Record(starvedEvent(client, p, pid, d, span))
	}
}

func starvedEvent(client string, p histories.Process, pid int, d, span time.Duration) histories.Op {
	return histories.Op{Type: histories.Info, F: histories.FStarved, Process: histories.Nemesis,
		Value: &histories.Value{Targets: []string{client}, Params: map[string]string{
			"process":     p.String(),
			"pid":         strconv.Itoa(pid),
			"duration_ns": strconv.FormatInt(int64(d), 10),
			"span_ns":     strconv.FormatInt(int64(span), 10),
		}}}
}
