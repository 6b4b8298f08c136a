package cluster

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// startToxiproxy runs toxiproxy's API server in-process on its own
// listener. (ApiServer.Listen takes an address, not a listener, and would
// need a fixed port.)
func (c *Cluster) startToxiproxy() error {
	lf, err := openLog(c.cfg.LogDir, "toxiproxy.log")
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	c.tpLog = lf
	c.tpServer = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), lf.zerolog())

	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return fmt.Errorf("cluster: toxiproxy listener: %w", err)
	}
	c.tpHTTP = &http.Server{
		Handler:           c.tpServer.Routes(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       60 * time.Second,
		ErrorLog:          lf.stdlog("toxiproxy-http: "),
	}
	go c.tpHTTP.Serve(ln) // returns ErrServerClosed on Close
	c.tpAddr = ln.Addr().String()
	c.tpClient = toxiclient.NewClient(c.tpAddr)
	return nil
}

// Toxiproxy returns a client for the cluster's toxiproxy HTTP API. Drive
// proxies and toxics only through it, so the same code works against a
// remote toxiproxy-server.
func (c *Cluster) Toxiproxy() *toxiclient.Client { return c.tpClient }

// ToxiproxyAddr returns the toxiproxy API address, "127.0.0.1:port".
func (c *Cluster) ToxiproxyAddr() string { return c.tpAddr }

// LinkName is the name of the proxy between client and member:
// "<client>-><member name>".
func LinkName(client string, m *Member) string { return client + "->" + m.Name }

// Endpoints returns the addresses ("127.0.0.1:port", usable as
// clientv3 endpoints) of client's proxies to every member, in member order,
// creating the proxies on first use. client names a workload process; it may
// use letters, digits, '_', '.' and '-'.
func (c *Cluster) Endpoints(client string) ([]string, error) {
	if err := checkName(client); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		addr, err := c.proxyLocked(LinkName(client, m), m.ClientAddr())
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
	p, err := c.tpClient.Proxy(LinkName(client, c.members[member]))
	if err != nil {
		return nil, fmt.Errorf("cluster: link %s: %w", LinkName(client, c.members[member]), err)
	}
	return p, nil
}

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
	if err := checkName(name); err != nil {
		return "", err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return "", ErrClosed
	}
	return c.proxyLocked(name, upstream)
}

// proxyLocked creates the proxy or returns the known one's address.
func (c *Cluster) proxyLocked(name, upstream string) (string, error) {
	if p, ok := c.proxies[name]; ok {
		if p.upstream != upstream {
			return "", fmt.Errorf("cluster: proxy %s exists with upstream %s, not %s", name, p.upstream, upstream)
		}
		return p.listen, nil
	}
	// A port below the ephemeral range: a proxy that a fault disables and
	// re-enables listens on it again, and an outgoing connection could
	// have taken an ephemeral one in between.
	ports, err := reservePorts(1)
	if err != nil {
		return "", fmt.Errorf("cluster: a port for proxy %s: %w", name, err)
	}
	c.ports = append(c.ports, ports...)
	p, err := c.tpClient.CreateProxy(name, net.JoinHostPort(host, strconv.Itoa(ports[0])), upstream)
	if err != nil {
		return "", fmt.Errorf("cluster: creating proxy %s: %w", name, err)
	}
	c.proxies[name] = proxyInfo{listen: p.Listen, upstream: upstream}
	return p.Listen, nil
}

type proxyInfo struct{ listen, upstream string }

func checkName(s string) error {
	if s == "" {
		return errors.New("cluster: empty name")
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == '-':
		default:
			return fmt.Errorf("cluster: name %q: only letters, digits, '_', '.' and '-' allowed", s)
		}
	}
	return nil
}

// ClientConfig returns a clientv3 configuration for client's proxied
// endpoints: no logging, 2 s dial timeout.
func (c *Cluster) ClientConfig(client string) (clientv3.Config, error) {
	eps, err := c.Endpoints(client)
	if err != nil {
		return clientv3.Config{}, err
	}
	return clientConfig(eps), nil
}

// clientConfig is the configuration of every client the cluster dials: no
// logging, 2 s dial timeout.
func clientConfig(endpoints []string) clientv3.Config {
	return clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()}
}

// Client dials client's proxied endpoints (see ClientConfig). The caller
// may Close it; Close of the cluster closes it in any case.
func (c *Cluster) Client(client string) (*clientv3.Client, error) {
	cfg, err := c.ClientConfig(client)
	if err != nil {
		return nil, err
	}
	return c.track(clientv3.New(cfg))
}

func (c *Cluster) track(cl *clientv3.Client, err error) (*clientv3.Client, error) {
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		cl.Close()
		return nil, ErrClosed
	}
	c.clients = append(c.clients, cl)
	return cl, nil
}
