package postgres

import (
	"context"
	"fmt"
	"sync"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"

	"github.com/locktest/locktest/backend/postgres/pgserver"
	"github.com/locktest/locktest/internal/proc"
	"github.com/locktest/locktest/system"
)

// pgSystem is a pgserver primary as a system under test: one member, pg0.
// What it offers: a pause of the server (SIGSTOP of its process group), a
// crash (SIGKILL, and a restart from its data: tables and sequences
// survive, every session and advisory lock is gone), and client links. Not
// partitions (one server), a leader, leases an operator revokes, a
// consistency read, membership changes, keys expired early, or (yet) a
// failover to a replica.
type pgSystem struct {
	s    *pgserver.Server
	desc string
	logs string

	mu     sync.Mutex
	paused bool
}

var (
	_ system.MemberPauser = (*pgSystem)(nil)
	_ system.Crasher      = (*pgSystem)(nil)
	_ system.Linker       = (*pgSystem)(nil)
	_ system.Processes    = (*pgSystem)(nil)
	_ system.Hinter       = (*pgSystem)(nil)
)

func newSystem(s *pgserver.Server, logs string) *pgSystem {
	return &pgSystem{s: s, logs: logs,
		desc: fmt.Sprintf("postgres %s, one primary (idle_session_timeout %v)", s.Binary().Version, s.IdleTimeout())}
}

func (p *pgSystem) Describe() string      { return p.desc }
func (p *pgSystem) MemberNames() []string { return []string{pgserver.Name} }
func (p *pgSystem) LogDir() string        { return p.logs }

func (p *pgSystem) Endpoints(client string) ([]string, error) {
	ep, err := p.s.Endpoint(client)
	if err != nil {
		return nil, err
	}
	return []string{ep}, nil
}

// ServerPids are the postmaster's and its live children's: a backend per
// session, and the background workers. A backend that has exited counts
// no more (its time went to the postmaster's reaped children, which are
// not counted).
func (p *pgSystem) ServerPids() []int {
	pid := p.s.Pid()
	if pid <= 0 {
		return nil
	}
	return append([]int{pid}, proc.Children(pid)...)
}

func member(i int) error {
	if i != 0 {
		return fmt.Errorf("postgres: no member %d", i)
	}
	return nil
}

func (p *pgSystem) PauseMember(i int) error {
	if err := member(i); err != nil {
		return err
	}
	if err := p.s.Pause(); err != nil {
		return err
	}
	p.setPaused(true)
	return nil
}

func (p *pgSystem) ResumeMember(i int) error {
	if err := member(i); err != nil {
		return err
	}
	if err := p.s.Resume(); err != nil {
		return err
	}
	p.setPaused(false)
	return nil
}

func (p *pgSystem) Paused(i int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return i == 0 && p.paused
}

func (p *pgSystem) setPaused(v bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = v
}

// HardStopMember kills the server; a paused one too, which is then no
// longer paused.
func (p *pgSystem) HardStopMember(i int) error {
	if err := member(i); err != nil {
		return err
	}
	if err := p.s.Crash(); err != nil {
		return err
	}
	p.setPaused(false)
	return nil
}

// RestartMember starts the server again from its data.
func (p *pgSystem) RestartMember(ctx context.Context, i int) error {
	if err := member(i); err != nil {
		return err
	}
	return p.s.Restart(ctx)
}

func (p *pgSystem) Running(i int) bool { return i == 0 && p.s.Running() }

func (p *pgSystem) Links(client string) ([]*toxiclient.Proxy, error) { return p.s.Links(client) }

func (p *pgSystem) ResourceLink(client string) (*toxiclient.Proxy, error) {
	return p.s.ResourceLink(client)
}

func (p *pgSystem) ClearToxics() error { return p.s.ClearToxics() }

// Hint says where the capabilities a PostgreSQL run lacks are to be had.
func (p *pgSystem) Hint() string {
	return "PostgreSQL runs offer pause, crash, isolate, slow and clock faults; the others need a recipe of another backend (locktest run --help lists them)"
}
