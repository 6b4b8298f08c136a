package cluster

import (
	"context"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locktest/locktest/system"
)

// A Cluster is a system under test with every capability of an etcd
// cluster.
var (
	_ system.System       = (*Cluster)(nil)
	_ system.Leaderer     = (*Cluster)(nil)
	_ system.Partitioner  = (*Cluster)(nil)
	_ system.MemberPauser = (*Cluster)(nil)
	_ system.Crasher      = (*Cluster)(nil)
	_ system.Linker       = (*Cluster)(nil)
	_ system.Leaser       = (*Cluster)(nil)
	_ system.Hasher       = (*Cluster)(nil)
	_ system.Reconfigurer = (*Cluster)(nil)
	_ system.Processes    = (*Cluster)(nil)
)

// Describe says what the cluster is.
func (c *Cluster) Describe() string {
	if c.cfg.Processes {
		return fmt.Sprintf("%s, %d member processes", c.etcd.Describe(), len(c.members))
	}
	return fmt.Sprintf("etcd %s, %d embedded members", c.etcd.Version, len(c.members))
}

// Etcd is the etcd the members run.
func (c *Cluster) Etcd() Etcd { return c.etcd }

// MemberNames names the members in order.
func (c *Cluster) MemberNames() []string {
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = m.Name
	}
	return out
}

// ServerPids are the member processes' IDs; none for embedded members,
// which run in locktest's process.
func (c *Cluster) ServerPids() []int {
	var pids []int
	for _, m := range c.Members() {
		if pid := m.Pid(); pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// LogDir is where the members and toxiproxy log.
func (c *Cluster) LogDir() string { return c.cfg.LogDir }

func parseLease(lease string) (clientv3.LeaseID, error) {
	id, err := strconv.ParseInt(lease, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("cluster: lease %q: %w", lease, err)
	}
	return clientv3.LeaseID(id), nil
}

// leases acts on client leases as an operator would, through a direct
// admin client: Cluster's and External's RevokeLease and LeaseGone.
type leases struct {
	admin func() (*clientv3.Client, error)
}

// RevokeLease revokes a lease (hex) through the admin client.
func (l leases) RevokeLease(ctx context.Context, lease string) error {
	admin, err := l.admin()
	if err != nil {
		return err
	}
	id, err := parseLease(lease)
	if err != nil {
		return err
	}
	if _, err := admin.Revoke(ctx, id); err != nil {
		return fmt.Errorf("revoking lease %s: %w", lease, err)
	}
	return nil
}

// LeaseGone reports whether the cluster no longer has a lease (hex).
func (l leases) LeaseGone(ctx context.Context, lease string) (bool, error) {
	admin, err := l.admin()
	if err != nil {
		return false, err
	}
	id, err := parseLease(lease)
	if err != nil {
		return false, err
	}
	resp, err := admin.TimeToLive(ctx, id)
	if err != nil {
		return false, err
	}
	return resp.TTL == -1, nil
}
