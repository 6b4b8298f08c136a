package zkserver

import (
	toxiclient "github.com/Shopify/toxiproxy/v2/client"
)

// LinkName is the name of the proxy between client and s: "c1->zk2".
func LinkName(client string, s *Server) string { return client + "->" + s.Name }

// Endpoints returns the addresses of client's proxies to every server, in
// server order, creating the proxies on first use. client names a workload
// process: letters, digits, '_', '.' and '-'.
func (e *Ensemble) Endpoints(client string) ([]string, error) {
	eps := make([]string, len(e.servers))
	for i, s := range e.servers {
		addr, err := e.Proxy(client, LinkName(client, s), s.ClientAddr)
		if err != nil {
			return nil, err
		}
		eps[i] = addr
	}
	return eps, nil
}

// Links returns client's proxies to every server, in order, fetched fresh
// from toxiproxy (Enabled and ActiveToxics are current). A fault on all of
// them isolates the client.
func (e *Ensemble) Links(client string) ([]*toxiclient.Proxy, error) {
	if _, err := e.Endpoints(client); err != nil {
		return nil, err
	}
	ps := make([]*toxiclient.Proxy, len(e.servers))
	for i, s := range e.servers {
		p, err := e.Proxies.Get(LinkName(client, s))
		if err != nil {
			return nil, err
		}
		ps[i] = p
	}
	return ps, nil
}
