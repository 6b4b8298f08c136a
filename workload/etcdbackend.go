package workload

import (
	"context"
	"fmt"

	"github.com/locktest/locktest/resource"
)

// etcdBackend is etcd as the workload reaches it. Each client's connection
// is its own *clientv3.Client over its own links, with the client's clock
// in charge of its leases (clockLease) and every read noted for the
// decision revision of its grants (revisions); the etcd-txn resource lives
// in it; the observer watches the members directly (etcdobserver.go).
type etcdBackend struct{ cl Cluster }

// Etcd is the Backend of an etcd cluster.
func Etcd(cl Cluster) Backend { return etcdBackend{cl} }

func (b etcdBackend) Name() string { return "etcd" }

func (b etcdBackend) ResourceProxy(client, upstream string) (string, error) {
	return b.cl.ResourceProxy(client, upstream)
}

func (b etcdBackend) connect(c *client) (conn, error) {
	cli, err := b.cl.Client(c.name)
	if err != nil {
		return conn{}, err
	}
	// Sessions grant and keep their leases alive through the client's
	// embedded Lease: this puts the client's clock in charge.
	c.lease = newClockLease(cli.Lease, c.clock, c.ctl)
	cli.Lease = c.lease
	// Every read the client's lock makes is noted, for the decision
	// revision of its grants.
	cli.KV = trackedKV{cli.KV, c.revs}
	cli.Watcher = trackedWatcher{cli.Watcher, c.revs}
	cn := conn{env: cli, close: cli.Close}
	if c.cfg.Resource == resource.EtcdTxn {
		// The value lives in etcd: the client reaches it over its own
		// etcd links.
		cn.txn = etcdStore{resource.NewEtcd(cli, resource.EtcdPrefix(c.cfg.Prefix))}
	}
	return cn, nil
}

func (b etcdBackend) observe(ctx context.Context, w *Workload) (Observer, error) {
	return startEtcdObserver(ctx, w, b.cl)
}

// finalStore is the etcd-txn resource over a direct link, for the final
// reads.
func (b etcdBackend) finalStore(prefix string) (store, func(), error) {
	direct, err := b.cl.DirectClient()
	if err != nil {
		return nil, nil, fmt.Errorf("workload: final reads: %w", err)
	}
	return etcdStore{resource.NewEtcd(direct, resource.EtcdPrefix(prefix))}, func() { direct.Close() }, nil
}
