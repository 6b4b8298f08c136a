package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/backend/postgres/pgserver"
	"github.com/locktest/locktest/internal/proc"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/system"
)

// replicated says whether a run of p needs the streaming replica: its
// faults include a failover. The one place that choice is made.
func replicated(p backend.Plan) bool {
	return slices.ContainsFunc(p.Families, func(f string) bool {
		return slices.Contains(nemesis.Needs(f), system.CapFailover)
	})
}

// pgSystem is a pgserver primary as a system under test: pg0, and its
// streaming replica pg1 when the run fails over (replicatedPG). What it
// offers: a pause of a server (SIGSTOP of its postmaster and every
// backend), a crash (SIGKILL, and a restart from its data: tables and
// sequences survive, every session and advisory lock is gone), and client
// links. Not partitions (the clients reach one server), a leader, leases
// an operator revokes, a consistency read, membership changes or keys
// expired early.
type pgSystem struct {
	s    *pgserver.Server
	desc string
	logs string

	mu     sync.Mutex
	paused map[int]bool
}

var (
	_ system.MemberPauser = (*pgSystem)(nil)
	_ system.Crasher      = (*pgSystem)(nil)
	_ system.Linker       = (*pgSystem)(nil)
	_ system.Processes    = (*pgSystem)(nil)
	_ system.Hinter       = (*pgSystem)(nil)
	_ system.Failoverer   = (*replicatedPG)(nil)
)

func newSystem(s *pgserver.Server, logs string) system.System {
	p := &pgSystem{s: s, logs: logs, paused: map[int]bool{},
		desc: fmt.Sprintf("postgres %s, one primary (idle_session_timeout %v)", s.Binary().Version, s.IdleTimeout())}
	if len(s.Members()) == 1 {
		return p
	}
	p.desc = fmt.Sprintf("postgres %s, a primary and its streaming replica (idle_session_timeout %v)", s.Binary().Version, s.IdleTimeout())
	return &replicatedPG{pgSystem: p}
}

func (p *pgSystem) Describe() string      { return p.desc }
func (p *pgSystem) MemberNames() []string { return p.s.Members() }
func (p *pgSystem) LogDir() string        { return p.logs }

func (p *pgSystem) Endpoints(client string) ([]string, error) {
	ep, err := p.s.Endpoint(client)
	if err != nil {
		return nil, err
	}
	return []string{ep}, nil
}

// ServerPids are each member's postmaster's and its live children's: a
// backend per session, and the background workers. A backend that has
// exited counts no more (its time went to the postmaster's reaped
// children, which are not counted).
func (p *pgSystem) ServerPids() []int {
	var pids []int
	for i := range p.s.Members() {
		if pid := p.s.Pid(i); pid > 0 {
			pids = append(append(pids, pid), proc.Children(pid)...)
		}
	}
	return pids
}

func (p *pgSystem) PauseMember(i int) error {
	if err := p.s.Pause(i); err != nil {
		return err
	}
	p.setPaused(i, true)
	return nil
}

func (p *pgSystem) ResumeMember(i int) error {
	if err := p.s.Resume(i); err != nil {
		return err
	}
	p.setPaused(i, false)
	return nil
}

func (p *pgSystem) Paused(i int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused[i]
}

func (p *pgSystem) setPaused(i int, v bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused[i] = v
}

// HardStopMember kills a server; a paused one too, which is then no
// longer paused.
func (p *pgSystem) HardStopMember(i int) error {
	if err := p.s.Crash(i); err != nil {
		return err
	}
	p.setPaused(i, false)
	return nil
}

// RestartMember starts a server again from its data.
func (p *pgSystem) RestartMember(ctx context.Context, i int) error { return p.s.Restart(ctx, i) }

func (p *pgSystem) Running(i int) bool { return p.s.Running(i) }

func (p *pgSystem) Links(client string) ([]*toxiclient.Proxy, error) { return p.s.Links(client) }

func (p *pgSystem) ResourceLink(client string) (*toxiclient.Proxy, error) {
	return p.s.ResourceLink(client)
}

func (p *pgSystem) ClearToxics() error { return p.s.ClearToxics() }

// replicatedPG is a primary with a streaming replica: what a failover
// needs. There is no watcher that promotes it (Patroni and the like are
// not PostgreSQL): Failover does what an operator's or a tool's failover
// does, pg_promote() on the replica once the primary is gone, and moves the
// clients' links, as a virtual address or a DNS name moved by such a tool
// does. Once per run: the promoted replica has no replica of its own.
type replicatedPG struct{ *pgSystem }

func (r *replicatedPG) CutReplication() error { return r.s.CutReplication() }

func (r *replicatedPG) Failover(ctx context.Context) (system.Promotion, error) {
	if r.s.FailedOver() {
		return system.Promotion{}, errors.New(r.FailedOver())
	}
	took, err := r.s.Failover(ctx)
	if err != nil {
		return system.Promotion{}, err
	}
	how := pgserver.Name + " killed (SIGKILL); " + pgserver.ReplicaName + ", its streaming replica, promoted by pg_promote() and every client's link moved to it: " +
		"the advisory locks held on " + pgserver.Name + " did not follow (they live in the primary's memory and are never replicated)"
	return system.Promotion{Old: 0, New: 1, How: how, Took: took}, nil
}

func (r *replicatedPG) FailedOver() string {
	if r.s.FailedOver() {
		return "pgserver fails over once per run: " + pgserver.ReplicaName + ", promoted, has no replica of its own"
	}
	return ""
}

// Hint says where the capabilities a PostgreSQL run lacks are to be had.
func (p *pgSystem) Hint() string {
	return "PostgreSQL runs offer pause, crash, isolate, slow and clock faults, and failover (asked for by name: a streaming replica is then started and promoted); the others need a recipe of another backend (locktest run --help lists them)"
}
