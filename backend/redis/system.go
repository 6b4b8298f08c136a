package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/backend/redis/redisserver"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/system"
)

// topology is the deployment a run of plan p starts: a recipe whose grant
// takes a majority (Redlock) runs on independent masters, as specified;
// another on a master with a replica and Sentinel when the run's faults
// need a failover, else on a single master. The one place that choice is
// made.
func topology(p backend.Plan) redisserver.Topology {
	switch {
	case p.Majority:
		return redisserver.Independent(5)
	case slices.ContainsFunc(p.Families, func(f string) bool {
		return slices.Contains(nemesis.Needs(f), system.CapFailover)
	}):
		return redisserver.Replicated
	}
	return redisserver.Single
}

// redisSystem is a redisserver deployment as a system under test. Its
// members are the data servers (r0, r1, ...). What it offers: member pauses
// (SIGSTOP), crashes (SIGKILL and a restart without data), client links,
// and the emulated clock jump (keys expired early); with a replica and
// Sentinel, a failover (replicatedRedis). Not partitions (independent servers have no peer links to cut), leases
// (a Redis lock's TTL is no lease an operator can revoke), a leader, or a
// consistency read (no two servers hold the same data).
type redisSystem struct {
	d    *redisserver.Deployment
	desc string
	logs string

	mu     sync.Mutex
	paused map[int]bool
}

var (
	_ system.MemberPauser = (*redisSystem)(nil)
	_ system.Crasher      = (*redisSystem)(nil)
	_ system.Linker       = (*redisSystem)(nil)
	_ system.EarlyExpirer = (*redisSystem)(nil)
	_ system.Processes    = (*redisSystem)(nil)
	_ system.Failoverer   = (*replicatedRedis)(nil)
)

func startRedis(ctx context.Context, bin string, t redisserver.Topology, dir, logs string) (*redisSystem, error) {
	b, err := redisserver.Find(bin)
	if err != nil {
		return nil, err
	}
	d, err := redisserver.Start(ctx, redisserver.Config{Binary: b, Topology: t, Dir: dir, LogDir: logs})
	if err != nil {
		return nil, fmt.Errorf("starting redis-server: %w", err)
	}
	var shape string
	switch n := len(d.Servers()); {
	case len(d.Sentinels()) > 0:
		shape = "master, replica and 3 Sentinels"
	case n == 1:
		shape = "single master"
	default:
		shape = fmt.Sprintf("%d independent masters", n)
	}
	return &redisSystem{d: d, desc: fmt.Sprintf("redis %s, %s", b.Version, shape), logs: logs, paused: map[int]bool{}}, nil
}

func (s *redisSystem) Describe() string { return s.desc }

func (s *redisSystem) MemberNames() []string {
	var names []string
	for _, r := range s.d.Servers() {
		names = append(names, r.Name)
	}
	return names
}

func (s *redisSystem) Endpoints(client string) ([]string, error) { return s.d.Endpoints(client) }

func (s *redisSystem) LogDir() string { return s.logs }

func (s *redisSystem) Close() error { return s.d.Close() }

// ServerPids are the processes of the servers and Sentinels.
func (s *redisSystem) ServerPids() []int {
	var pids []int
	for _, r := range append(s.d.Servers(), s.d.Sentinels()...) {
		if pid := r.Pid(); pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

func (s *redisSystem) PauseMember(i int) error {
	if err := s.d.Pause(i); err != nil {
		return err
	}
	s.setPaused(i, true)
	return nil
}

func (s *redisSystem) ResumeMember(i int) error {
	if err := s.d.Resume(i); err != nil {
		return err
	}
	s.setPaused(i, false)
	return nil
}

func (s *redisSystem) Paused(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused[i]
}

func (s *redisSystem) setPaused(i int, p bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.paused[i] = p
}

// HardStopMember kills server i; a paused one too, which is then no longer
// paused.
func (s *redisSystem) HardStopMember(i int) error {
	if err := s.d.Crash(i); err != nil {
		return err
	}
	s.setPaused(i, false)
	return nil
}

// RestartMember starts server i again, empty: Redis here keeps nothing on
// disk.
func (s *redisSystem) RestartMember(ctx context.Context, i int) error { return s.d.Restart(ctx, i) }

func (s *redisSystem) Running(i int) bool { return s.d.Running(i) }

func (s *redisSystem) Links(client string) ([]*toxiclient.Proxy, error) { return s.d.Links(client) }

func (s *redisSystem) ResourceLink(client string) (*toxiclient.Proxy, error) {
	return s.d.ResourceLink(client)
}

func (s *redisSystem) ClearToxics() error { return s.d.ClearToxics() }

// ExpireEarly emulates a forward jump of server i's clock: every key of
// its that has a TTL (the lock keys; fencing counters have none) expires
// now. All servers share the host clock: nothing else moves.
func (s *redisSystem) ExpireEarly(ctx context.Context, i int) ([]string, error) {
	return s.d.ExpireEarly(ctx, i, "*")
}

func (s *redisSystem) Expiring(ctx context.Context, i int) ([]string, error) {
	return s.d.Expiring(ctx, i, "*")
}

// replicatedRedis is a master with a replica and Sentinel: what a failover
// needs. redisserver fails over from the starting roles only, so a run
// has one failover.
type replicatedRedis struct {
	*redisSystem

	mu         sync.Mutex
	failedOver string // why no further failover; "" before the first
}

func (s *replicatedRedis) CutReplication() error { return s.d.CutReplication() }

func (s *replicatedRedis) Failover(ctx context.Context) (system.Promotion, error) {
	if why := s.FailedOver(); why != "" {
		return system.Promotion{}, errors.New(why)
	}
	p, err := s.d.Failover(ctx)
	// Even a failed one may have killed the master or promoted the
	// replica: the starting roles are gone either way.
	s.mu.Lock()
	s.failedOver = "redisserver fails over once per run, from the starting roles (r0 master, r1 its replica)"
	s.mu.Unlock()
	return p, err
}

func (s *replicatedRedis) FailedOver() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failedOver
}

// Hint says where the capabilities a Redis run lacks are to be had.
func (s *redisSystem) Hint() string {
	return "Redis runs offer pause, crash, isolate, slow, clock and clock-jump-emulated faults, and failover with redis-setnx or redis-del; the others need a recipe of another backend (locktest run --help lists them)"
}
