package harness

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"

	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/lock/redislock"
	"github.com/locktest/locktest/redisserver"
	"github.com/locktest/locktest/resource"
	"github.com/locktest/locktest/system"
)

// redisTopology is the deployment a Redis recipe runs on, and whether the
// recipe is one: Redlock's independent masters, as specified, or a single
// master. The one place that choice is made.
func redisTopology(recipe string) (redisserver.Topology, bool) {
	switch {
	case recipe == redislock.RedlockName:
		return redisserver.Independent(5), true
	case slices.ContainsFunc(redislock.Builtins, func(b lock.Builtin) bool { return b.Name == recipe }):
		return redisserver.Single, true
	}
	return redisserver.Topology{}, false
}

// IsRedis reports whether recipe is a Redis recipe: its run starts
// redis-server, and its servers are its members.
func IsRedis(recipe string) bool {
	_, ok := redisTopology(recipe)
	return ok
}

// redisDefaults checks the options of a Redis recipe's run and sizes it:
// its members are the deployment's servers. A Redis recipe runs on servers
// locktest starts, and none of etcd's options apply; a missing or unusable
// redis-server is said here, before anything starts.
func (o *Options) redisDefaults() error {
	t, ok := redisTopology(o.RecipeName)
	if !ok {
		if o.Cluster.RedisBin != "" {
			return fmt.Errorf("--redis-bin is for a Redis recipe (%s), not %s", redisRecipes(), o.RecipeName)
		}
		return nil
	}
	switch {
	case o.Cluster.Mode != "" && o.Cluster.Mode != ClusterEmbedded:
		return fmt.Errorf("--cluster %s is for etcd recipes: recipe %s runs on redis-server processes locktest starts", o.Cluster.Mode, o.RecipeName)
	case o.Cluster.EtcdBin != "":
		return fmt.Errorf("--etcd-bin is for etcd recipes, not %s", o.RecipeName)
	case o.Resource == resource.EtcdTxn:
		return fmt.Errorf("--resource %s keeps the values in etcd: recipe %s runs on Redis (use fenced or unfenced)", resource.EtcdTxn, o.RecipeName)
	}
	if _, err := redisserver.Find(o.Cluster.RedisBin); err != nil {
		return err
	}
	o.Members = t.Servers()
	return nil
}

// redisRecipes names the built-in Redis recipes.
func redisRecipes() string {
	var names []string
	for _, b := range redislock.Builtins {
		names = append(names, b.Name)
	}
	return strings.Join(names, ", ")
}

// redisSystem is a redisserver deployment as a system under test. Its
// members are the data servers (r0, r1, ...). What it offers: member pauses
// (SIGSTOP), crashes (SIGKILL and a restart without data) and client links.
// Not partitions (independent servers have no peer links to cut), leases
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

// Hint says where the capabilities a Redis run lacks are to be had.
func (s *redisSystem) Hint() string {
	return "Redis runs offer pause, crash, isolate, slow and clock faults; the others need an etcd recipe"
}
