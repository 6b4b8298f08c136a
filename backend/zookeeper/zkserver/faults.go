package zkserver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/locktest/locktest/backend/serverkit"
)

// The faults that strike the servers themselves. Faults on a client's
// links are toxics on its proxies (links.go). Each takes a server's index
// in Servers(); they are serialised with each other and with Close.

// fault looks server i up and takes the fault lock; it fails on a closed
// ensemble.
func (e *Ensemble) fault(i int) (*Server, func(), error) {
	return serverkit.FaultOn(&e.Base, e.servers, i)
}

// errDown is a signal to a server that is not running.
func errDown(s *Server) error { return fmt.Errorf("zkserver: %s is down", s.Name) }

// Pause freezes server i (SIGSTOP): it answers nothing, until Resume, while
// its kernel still accepts connections. Led by it, the others elect another
// leader after syncLimit ticks; following, its clients' sessions move to
// another server after 2/3 of their timeout.
func (e *Ensemble) Pause(i int) error { return e.freeze(i, true) }

// Resume continues server i after Pause (SIGCONT).
func (e *Ensemble) Resume(i int) error { return e.freeze(i, false) }

func (e *Ensemble) freeze(i int, stop bool) error {
	s, unlock, err := e.fault(i)
	if err != nil {
		return err
	}
	defer unlock()
	if !s.proc.Running() {
		return errDown(s)
	}
	if stop {
		return s.proc.Pause()
	}
	return s.proc.Resume()
}

// Paused reports whether server i is paused.
func (e *Ensemble) Paused(i int) bool {
	if i < 0 || i >= len(e.servers) {
		return false
	}
	return e.servers[i].proc.Paused()
}

// Kill crashes server i (SIGKILL, a paused one too) and waits until it has
// exited. Its data stays: Restart starts it again from there.
func (e *Ensemble) Kill(i int) error {
	s, unlock, err := e.fault(i)
	if err != nil {
		return err
	}
	defer unlock()
	return s.proc.Kill()
}

// Running reports whether server i's process is up (paused or not).
func (e *Ensemble) Running(i int) bool {
	if i < 0 || i >= len(e.servers) {
		return false
	}
	return e.servers[i].Pid() != 0
}

// Restart starts killed server i again from its data, and returns once it
// answers on its client port and listens on its election port (serving or
// not: it rejoins the ensemble by itself, from its transaction log, once
// it reaches a quorum). It holds the fault lock only to start the process,
// not through the JVM's boot: servers restarted together (an outage of the
// whole ensemble) boot together, as etcd's members do. Held through the
// boot, each server of the outage opening started only once the one before
// listened: the whole ensemble's restart took 2.5-23 s at a load of 15-57
// (1.7-11 s booting together).
func (e *Ensemble) Restart(ctx context.Context, i int) error {
	s, unlock, err := e.fault(i)
	if err != nil {
		return err
	}
	if s.Pid() != 0 {
		unlock()
		return fmt.Errorf("zkserver: %s is running", s.Name)
	}
	err = e.startProcess(s)
	unlock()
	if err != nil {
		return err
	}
	w := serverkit.Wait{Every: 25 * time.Millisecond, What: "zkserver: waiting for " + s.Name + " to restart",
		Proc: &s.proc, Who: "zkserver: " + s.Name}
	return w.Until(ctx, func(ctx context.Context) error {
		if _, err := fourLetter(ctx, s.ClientAddr, "srvr"); err != nil {
			return err
		}
		ok, err := e.listening(s)
		if err != nil {
			return serverkit.Final(err)
		}
		if !ok {
			return errors.New("not listening on its election port yet")
		}
		return nil
	})
}

// Pids are the processes of the running servers.
func (e *Ensemble) Pids() []int {
	var pids []int
	for _, s := range e.servers {
		if pid := s.Pid(); pid != 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// CutMode is how a cut between two servers behaves.
type CutMode int

const (
	// NoCut: traffic flows.
	NoCut CutMode = iota
	// CutClose closes the pair's connections and refuses new ones: the
	// peers see their connections end at once.
	CutClose
	// CutDrop keeps the pair's connections open and drops their bytes, and
	// accepts new connections and answers nothing, as a link that loses
	// every packet: the peers notice only by their timeouts (a leader cut
	// from the others steps down after syncLimit ticks). The heal closes
	// those connections.
	CutDrop
)

func pair(a, b int) [2]int {
	if a > b {
		a, b = b, a
	}
	return [2]int{a, b}
}

// cutMode is the relays' view of the cuts, by server id.
func (e *Ensemble) cutMode(from, to int) CutMode {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cuts[pair(from, to)]
}

// SetCuts makes exactly the given pairs of servers (indices) unable to
// reach each other, both ways, in mode; nil mends every cut. The
// connections of a pair newly cut with CutClose are closed, as those of a
// pair whose CutDrop ends (their streams lost bytes): ZooKeeper's peers
// open new ones.
func (e *Ensemble) SetCuts(pairs [][2]int, mode CutMode) error {
	unlock, err := e.Fault()
	if err != nil {
		return err
	}
	defer unlock()
	if len(e.servers) < 2 {
		return errors.New("zkserver: one server has no peers to cut")
	}
	next := map[[2]int]CutMode{}
	for _, p := range pairs {
		if p[0] < 0 || p[1] < 0 || p[0] >= len(e.servers) || p[1] >= len(e.servers) || p[0] == p[1] {
			return fmt.Errorf("zkserver: no pair of servers %v", p)
		}
		next[pair(e.servers[p[0]].ID, e.servers[p[1]].ID)] = mode
	}
	e.mu.Lock()
	prev := e.cuts
	e.cuts = next
	e.mu.Unlock()
	for p, m := range prev {
		if _, still := next[p]; !still && m == CutDrop {
			e.closePair(p)
		}
	}
	for p, m := range next {
		if m == CutClose && prev[p] != CutClose {
			e.closePair(p)
		}
	}
	return nil
}

// closePair closes the peer connections between the two servers of p
// (ids).
func (e *Ensemble) closePair(p [2]int) {
	a, b := e.servers[p[0]-1], e.servers[p[1]-1]
	for _, r := range a.relays {
		r.CutFrom(b.ID)
	}
	for _, r := range b.relays {
		r.CutFrom(a.ID)
	}
}

// Leader returns the index of the server that leads a quorum: among the
// running servers that are not paused, the one answering srvr as leader
// of the newest epoch (a leader resumed after SIGSTOP goes on saying
// "leader" for up to 200 ms while another leads), with a majority of the
// ensemble serving. It waits until there is one, or ctx ends.
func (e *Ensemble) Leader(ctx context.Context) (int, error) {
	for {
		if err := e.Check(); err != nil {
			return 0, err
		}
		if i, ok := e.leader(ctx); ok {
			return i, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("zkserver: no leader with a quorum: %w", ctx.Err())
		case <-time.After(25 * time.Millisecond):
		}
	}
}

func (e *Ensemble) leader(ctx context.Context) (int, bool) {
	sts := make([]Status, len(e.servers))
	ok := make([]bool, len(e.servers))
	var wg sync.WaitGroup
	for i, s := range e.servers {
		if s.Pid() == 0 || e.Paused(i) {
			continue
		}
		wg.Go(func() {
			st, err := Srvr(ctx, s.ClientAddr)
			sts[i], ok[i] = st, err == nil && st.Mode != ""
		})
	}
	wg.Wait()
	leader, epoch, tie, serving := -1, int64(-1), false, 0
	for i, st := range sts {
		if !ok[i] {
			continue
		}
		serving++
		if st.Mode != ModeLeader && st.Mode != ModeStandalone {
			continue
		}
		switch ep := st.Zxid >> 32; {
		case ep > epoch:
			leader, epoch, tie = i, ep, false
		case ep == epoch:
			tie = true
		}
	}
	return leader, leader >= 0 && !tie && serving > len(e.servers)/2
}
