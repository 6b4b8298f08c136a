package mysql

import (
	"context"
	"fmt"
	"sync"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"

	"github.com/locktest/locktest/backend/mysql/mysqlserver"
	"github.com/locktest/locktest/system"
)

// mySystem is a MariaDB server as a system under test: one member, my0.
// What it offers: a pause of the server (SIGSTOP), a crash (SIGKILL, and a
// restart from its data: the sequence survives, every session and its
// GET_LOCK locks are gone), and client links. Not partitions (one server),
// a leader, leases an operator revokes, a consistency read, membership
// changes, keys expired early, or a failover.
type mySystem struct {
	s    *mysqlserver.Server
	desc string
	logs string

	mu     sync.Mutex
	paused bool
}

var (
	_ system.MemberPauser = (*mySystem)(nil)
	_ system.Crasher      = (*mySystem)(nil)
	_ system.Linker       = (*mySystem)(nil)
	_ system.Processes    = (*mySystem)(nil)
	_ system.Hinter       = (*mySystem)(nil)
)

func newSystem(s *mysqlserver.Server, logs string) *mySystem {
	return &mySystem{s: s, logs: logs,
		desc: fmt.Sprintf("mariadb %s, one server (wait_timeout %v)", s.Binary().Version, s.IdleTimeout())}
}

func (p *mySystem) Describe() string      { return p.desc }
func (p *mySystem) MemberNames() []string { return []string{mysqlserver.Name} }
func (p *mySystem) LogDir() string        { return p.logs }

func (p *mySystem) Endpoints(client string) ([]string, error) {
	ep, err := p.s.Endpoint(client)
	if err != nil {
		return nil, err
	}
	return []string{ep}, nil
}

// ServerPids is mariadbd's.
func (p *mySystem) ServerPids() []int {
	if pid := p.s.Pid(); pid > 0 {
		return []int{pid}
	}
	return nil
}

func member(i int) error {
	if i != 0 {
		return fmt.Errorf("mysql: no member %d", i)
	}
	return nil
}

func (p *mySystem) PauseMember(i int) error {
	if err := member(i); err != nil {
		return err
	}
	if err := p.s.Pause(); err != nil {
		return err
	}
	p.setPaused(true)
	return nil
}

func (p *mySystem) ResumeMember(i int) error {
	if err := member(i); err != nil {
		return err
	}
	if err := p.s.Resume(); err != nil {
		return err
	}
	p.setPaused(false)
	return nil
}

func (p *mySystem) Paused(i int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return i == 0 && p.paused
}

func (p *mySystem) setPaused(v bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = v
}

// HardStopMember kills the server; a paused one too, which is then no
// longer paused.
func (p *mySystem) HardStopMember(i int) error {
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
func (p *mySystem) RestartMember(ctx context.Context, i int) error {
	if err := member(i); err != nil {
		return err
	}
	return p.s.Restart(ctx)
}

func (p *mySystem) Running(i int) bool { return i == 0 && p.s.Running() }

func (p *mySystem) Links(client string) ([]*toxiclient.Proxy, error) { return p.s.Links(client) }

func (p *mySystem) ResourceLink(client string) (*toxiclient.Proxy, error) {
	return p.s.ResourceLink(client)
}

func (p *mySystem) ClearToxics() error { return p.s.ClearToxics() }

// Hint says where the capabilities a MariaDB run lacks are to be had.
func (p *mySystem) Hint() string {
	return "MariaDB runs offer pause, crash, isolate, slow and clock faults; the others need a recipe of another backend (locktest run --help lists them)"
}
