package cluster

import (
	"crypto/tls"
	"fmt"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Toxiproxy returns a client for the cluster's toxiproxy HTTP API. Drive
// proxies and toxics only through it, so the same code works against a
// remote toxiproxy-server.
func (c *Cluster) Toxiproxy() *toxiclient.Client { return c.Proxies.API() }

// ToxiproxyAddr returns the toxiproxy API address, "127.0.0.1:port".
func (c *Cluster) ToxiproxyAddr() string { return c.Proxies.Addr() }

// LinkName is the name of the proxy between client and member:
// "<client>-><member name>".
func LinkName(client string, m *Member) string { return client + "->" + m.Name }

// Endpoints returns the addresses ("127.0.0.1:port", usable as
// clientv3 endpoints) of client's proxies to every member, in member order,
// creating the proxies on first use. client names a workload process; it may
// use letters, digits, '_', '.' and '-'.
func (c *Cluster) Endpoints(client string) ([]string, error) {
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		addr, err := c.Base.Proxy(client, LinkName(client, m), m.ClientAddr())
		if err != nil {
			return nil, err
		}
		eps[i] = addr
	}
	return eps, nil
}

// Link returns the toxiproxy proxy between client and member (an index into
// Members()), creating client's proxies if needed. The proxy is fetched
// fresh from the API, so its Enabled and ActiveToxics are current.
func (c *Cluster) Link(client string, member int) (*toxiclient.Proxy, error) {
	if member < 0 || member >= len(c.members) {
		return nil, fmt.Errorf("cluster: no member %d", member)
	}
	if _, err := c.Endpoints(client); err != nil {
		return nil, err
	}
	return c.Proxies.Get(LinkName(client, c.members[member]))
}

// LinkProtocol says the client links carry HTTP/2 (gRPC): see
// system.Multiplexed.
func (c *Cluster) LinkProtocol() string { return "h2" }

// Links returns client's proxies to every member, in member order.
func (c *Cluster) Links(client string) ([]*toxiclient.Proxy, error) {
	ps := make([]*toxiclient.Proxy, len(c.members))
	for i := range c.members {
		p, err := c.Link(client, i)
		if err != nil {
			return nil, err
		}
		ps[i] = p
	}
	return ps, nil
}

// Proxy creates (once) a proxy called name in front of upstream
// ("host:port") and returns its listen address. Use it for services other
// than etcd, such as the resource the lock protects. Asking again for an
// existing name with another upstream is an error.
func (c *Cluster) Proxy(name, upstream string) (string, error) {
	return c.Base.Proxy(name, name, upstream)
}

// ClientConfig returns a clientv3 configuration for client's proxied
// endpoints: no logging, 2 s dial timeout.
func (c *Cluster) ClientConfig(client string) (clientv3.Config, error) {
	eps, err := c.Endpoints(client)
	if err != nil {
		return clientv3.Config{}, err
	}
	return c.clientConfig(eps), nil
}

// clientConfig is the configuration of every client the cluster dials: no
// logging, 2 s dial timeout, TLS when the members serve it.
func (c *Cluster) clientConfig(endpoints []string) clientv3.Config {
	return clientConfigTLS(endpoints, c.tls)
}

// clientConfigTLS is a client configuration with no logging, a 2 s dial
// timeout and tc (nil: plain TCP).
func clientConfigTLS(endpoints []string, tc *tls.Config) clientv3.Config {
	return clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop(), TLS: tc}
}

// Client dials client's proxied endpoints (see ClientConfig). The caller
// may Close it; Close of the cluster closes it in any case.
func (c *Cluster) Client(client string) (*clientv3.Client, error) {
	cfg, err := c.ClientConfig(client)
	if err != nil {
		return nil, err
	}
	return dial(&c.Base, cfg)
}
