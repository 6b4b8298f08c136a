package zookeeper

import (
	"context"
	"fmt"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"

	"github.com/locktest/locktest/backend/zookeeper/zkserver"
	"github.com/locktest/locktest/system"
)

// ensemble is a zkserver ensemble as a system under test. Its members are
// the servers (zk1, zk2, ...). What it offers: member pauses (SIGSTOP),
// crashes (SIGKILL, and a restart from the data: the server rejoins from
// its transaction log), partitions (at the relays in front of the peer
// ports: real peer traffic), a leader (the server leading a quorum, of the
// newest epoch), and client links. Not leases an operator can revoke
// (ZooKeeper has no call that ends another's session), a consistency read,
// membership changes (no dynamic reconfiguration), a failover (ZAB elects
// by itself), or keys expired early (sessions expire on the leader's
// clock, which is the host's).
type ensemble struct {
	e    *zkserver.Ensemble
	desc string
	logs string
}

var (
	_ system.MemberPauser = (*ensemble)(nil)
	_ system.Crasher      = (*ensemble)(nil)
	_ system.Partitioner  = (*ensemble)(nil)
	_ system.Leaderer     = (*ensemble)(nil)
	_ system.Linker       = (*ensemble)(nil)
	_ system.Processes    = (*ensemble)(nil)
	_ system.Hinter       = (*ensemble)(nil)
)

func newEnsemble(e *zkserver.Ensemble, logs string) *ensemble {
	return &ensemble{e: e, logs: logs,
		desc: fmt.Sprintf("zookeeper %s, %d servers (QuorumPeerMain processes)", e.Version(), len(e.Servers()))}
}

func (s *ensemble) Describe() string { return s.desc }

func (s *ensemble) MemberNames() []string {
	var names []string
	for _, sv := range s.e.Servers() {
		names = append(names, sv.Name)
	}
	return names
}

func (s *ensemble) Endpoints(client string) ([]string, error) { return s.e.Endpoints(client) }

func (s *ensemble) LogDir() string { return s.logs }

// LinkProtocol says the client links carry ZooKeeper's protocol, whose
// pings and watch events are no request's reply: see system.Multiplexed.
func (s *ensemble) LinkProtocol() string { return "zk" }

// ServerPids are the servers' JVMs.
func (s *ensemble) ServerPids() []int { return s.e.Pids() }

func (s *ensemble) PauseMember(i int) error  { return s.e.Pause(i) }
func (s *ensemble) ResumeMember(i int) error { return s.e.Resume(i) }
func (s *ensemble) Paused(i int) bool        { return s.e.Paused(i) }

// HardStopMember kills server i; a paused one too, which is then no
// longer paused.
func (s *ensemble) HardStopMember(i int) error { return s.e.Kill(i) }

// RestartMember starts server i again from its data.
func (s *ensemble) RestartMember(ctx context.Context, i int) error { return s.e.Restart(ctx, i) }

func (s *ensemble) Running(i int) bool { return s.e.Running(i) }

// SetCuts cuts the pairs at the relays, dropping their bytes: as a network
// would, the servers notice by their timeouts (a leader cut from a quorum
// steps down after syncLimit ticks, 1 s).
func (s *ensemble) SetCuts(pairs [][2]int) error { return s.e.SetCuts(pairs, zkserver.CutDrop) }

func (s *ensemble) Leader(ctx context.Context) (int, error) { return s.e.Leader(ctx) }

func (s *ensemble) Links(client string) ([]*toxiclient.Proxy, error) { return s.e.Links(client) }

func (s *ensemble) ResourceLink(client string) (*toxiclient.Proxy, error) {
	return s.e.ResourceLink(client)
}

func (s *ensemble) ClearToxics() error { return s.e.ClearToxics() }

// Hint says where the capabilities a ZooKeeper run lacks are to be had.
func (s *ensemble) Hint() string {
	return "ZooKeeper runs offer partition, isolate, clock, pause, crash and slow faults; the others need a recipe of another backend (locktest run --help lists them)"
}
