package cluster

import (
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locktest/locktest/backend/serverkit"
)

// DirectClient dials the given members (all, if none are given) directly,
// not through toxiproxy: an operator's or observer's view, which faults on
// client links do not touch. The caller may Close it; Close of the cluster
// closes it in any case.
func (c *Cluster) DirectClient(members ...int) (*clientv3.Client, error) {
	if len(members) == 0 {
		for i := range c.members {
			members = append(members, i)
		}
	}
	eps := make([]string, 0, len(members))
	for _, i := range members {
		m, err := c.member(i)
		if err != nil {
			return nil, err
		}
		eps = append(eps, m.ClientURL)
	}
	return dial(&c.Base, c.clientConfig(eps))
}

// dial makes a client of cfg that b's Close closes.
func dial(b *serverkit.Base, cfg clientv3.Config) (*clientv3.Client, error) {
	cl, err := clientv3.New(cfg)
	if err != nil {
		return nil, err
	}
	if err := b.Track(cl); err != nil {
		return nil, err
	}
	return cl, nil
}

// AdminClient returns a DirectClient to all members, made once and shared.
// Do not Close it; Close of the cluster does.
func (c *Cluster) AdminClient() (*clientv3.Client, error) {
	c.mu.Lock()
	if c.admin != nil {
		defer c.mu.Unlock()
		return c.admin, nil
	}
	c.mu.Unlock()
	cl, err := c.DirectClient()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.admin == nil {
		c.admin = cl
	}
	return c.admin, nil
}
