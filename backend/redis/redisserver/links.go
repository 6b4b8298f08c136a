package redisserver

import (
	"context"
	"fmt"
	"net"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
)

// LinkName is the name of the proxy between client and s: "c1->r0".
func LinkName(client string, s *Server) string { return client + "->" + s.Name }

// Endpoints returns the addresses of client's proxies to every data server,
// in server order, creating the proxies on first use. client names a
// workload process: letters, digits, '_', '.' and '-'.
func (d *Deployment) Endpoints(client string) ([]string, error) {
	return d.endpoints(client, d.servers)
}

func (d *Deployment) endpoints(client string, to []*Server) ([]string, error) {
	eps := make([]string, len(to))
	for i, s := range to {
		addr, err := d.Proxy(client, LinkName(client, s), s.Addr)
		if err != nil {
			return nil, err
		}
		eps[i] = addr
	}
	return eps, nil
}

// Links returns client's proxies, fetched fresh from toxiproxy (Enabled and
// ActiveToxics are current): to every data server in order, then to every
// Sentinel. A fault on all of them isolates the client.
func (d *Deployment) Links(client string) ([]*toxiclient.Proxy, error) {
	nodes := d.nodes()
	ps := make([]*toxiclient.Proxy, len(nodes))
	for i, s := range nodes {
		if _, err := d.endpoints(client, []*Server{s}); err != nil {
			return nil, err
		}
		p, err := d.Proxies.Get(LinkName(client, s))
		if err != nil {
			return nil, err
		}
		ps[i] = p
	}
	return ps, nil
}

// Dialer returns a dialer for client's Redis connections: it dials the
// direct address of a server or Sentinel over client's own proxy to it.
// Give it to a client that learns addresses from Sentinel (go-redis's
// failover client), so that the master and Sentinels it is told of are
// reached over the client's links. Other addresses are refused.
func (d *Deployment) Dialer(client string) (func(ctx context.Context, network, addr string) (net.Conn, error), error) {
	route := map[string]string{}
	for _, to := range [][]*Server{d.servers, d.sentinels} {
		eps, err := d.endpoints(client, to)
		if err != nil {
			return nil, err
		}
		for i, s := range to {
			route[s.Addr] = eps[i]
		}
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		proxy, ok := route[addr]
		if !ok {
			return nil, fmt.Errorf("redisserver: %s is not a server of this deployment", addr)
		}
		var nd net.Dialer
		return nd.DialContext(ctx, network, proxy)
	}, nil
}

// Toxiproxy is a client of the toxiproxy API that holds the links.
func (d *Deployment) Toxiproxy() *toxiclient.Client { return d.Proxies.API() }
