// Package links puts a run's client links behind toxiproxy, where faults
// cut, slow and hold them: an in-process toxiproxy on loopback (Start), or
// a toxiproxy-server someone runs (Connect), next to the clients or next to
// the servers. Links tracks the proxies it made and, on Close, deletes
// those and only those.
package links

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	"github.com/rs/zerolog"
	zlog "github.com/rs/zerolog/log"

	"github.com/locktest/locktest/internal/ports"
)

// Links is one run's set of proxies. Safe for concurrent use.
type Links struct {
	api  *toxiclient.Client
	addr string // API address, host:port
	host string // where proxies listen

	// In-process server only.
	server *toxiproxy.ApiServer
	http   *http.Server

	mu      sync.Mutex
	closed  bool
	proxies map[string]proxyInfo
	ports   []int
}

type proxyInfo struct{ listen, upstream string }

// ErrClosed is returned by methods of closed Links.
var ErrClosed = errors.New("links: closed")

// silenceGlobal quiets zerolog's global logger, which toxiproxy's
// bandwidth toxic (the slow fault) logs to, at trace level, instead of the
// server's: by default it writes to the user's terminal.
var silenceGlobal sync.Once

// Start runs toxiproxy's API server in this process on a loopback port,
// logging to logTo (nil discards).
func Start(logTo io.Writer) (*Links, error) {
	silenceGlobal.Do(func() { zlog.Logger = zerolog.Nop() })
	zl := zerolog.Nop()
	if logTo != nil {
		zl = zerolog.New(logTo).Level(zerolog.DebugLevel).With().Timestamp().Logger()
	}
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zl)
	// ApiServer.Listen takes an address, not a listener, and would need a
	// fixed port.
	ln, err := net.Listen("tcp", net.JoinHostPort(ports.Host, "0"))
	if err != nil {
		return nil, fmt.Errorf("links: toxiproxy listener: %w", err)
	}
	errLog := io.Discard
	if logTo != nil {
		errLog = logTo
	}
	hs := &http.Server{
		Handler:           server.Routes(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       60 * time.Second,
		ErrorLog:          log.New(errLog, "toxiproxy-http: ", log.LstdFlags|log.Lmicroseconds),
	}
	go hs.Serve(ln) // returns ErrServerClosed on Close
	addr := ln.Addr().String()
	return &Links{
		api: toxiclient.NewClient(addr), addr: addr, host: ports.Host,
		server: server, http: hs, proxies: map[string]proxyInfo{},
	}, nil
}

// Connect uses the toxiproxy-server whose API is at rawURL
// ("http://host:8474" or "host:8474"). Its proxies listen on the API's
// host, so clients must be able to reach that host. It fails, creating
// nothing, unless the URL answers as a toxiproxy.
func Connect(rawURL string) (*Links, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		u, err = url.Parse("http://" + rawURL)
	}
	if err != nil || u.Host == "" || u.Scheme != "http" {
		return nil, fmt.Errorf("--toxiproxy %s: want http://host:port of a toxiproxy-server's API", rawURL)
	}
	if err := checkToxiproxy(u.Host); err != nil {
		return nil, fmt.Errorf("--toxiproxy %s: not a toxiproxy: %v", rawURL, err)
	}
	return &Links{api: toxiclient.NewClient(u.Host), addr: u.Host, host: u.Hostname(), proxies: map[string]proxyInfo{}}, nil
}

// checkToxiproxy says whether addr answers as a toxiproxy API does: GET
// /version with a version, GET /proxies with a JSON object.
func checkToxiproxy(addr string) error {
	hc := &http.Client{Timeout: 3 * time.Second}
	get := func(path string) ([]byte, error) {
		resp, err := hc.Get("http://" + addr + path)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return b, nil
	}
	if _, err := get("/version"); err != nil {
		return err
	}
	b, err := get("/proxies")
	if err != nil {
		return err
	}
	var proxies map[string]json.RawMessage
	if err := json.Unmarshal(b, &proxies); err != nil {
		return errors.New("GET /proxies did not answer with toxiproxy's JSON")
	}
	return nil
}

// Addr is the toxiproxy API's address, "host:port".
func (l *Links) Addr() string { return l.addr }

// API is a client of the toxiproxy API. Drive proxies and toxics only
// through it, so that the same code works against a remote server.
func (l *Links) API() *toxiclient.Client { return l.api }

// Proxy creates (once) a proxy called name in front of upstream
// ("host:port") and returns its listen address. Asking again for a name
// with another upstream is an error.
func (l *Links) Proxy(name, upstream string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return "", ErrClosed
	}
	if p, ok := l.proxies[name]; ok {
		if p.upstream != upstream {
			return "", fmt.Errorf("links: proxy %s exists with upstream %s, not %s", name, p.upstream, upstream)
		}
		return p.listen, nil
	}
	p, err := l.create(name, upstream)
	if err != nil {
		return "", err
	}
	addr := p.Listen
	if h, port, err := net.SplitHostPort(addr); err == nil && (h == "" || net.ParseIP(h).IsUnspecified()) {
		addr = net.JoinHostPort(l.host, port)
	}
	l.proxies[name] = proxyInfo{listen: addr, upstream: upstream}
	return addr, nil
}

// portAttempts bounds how many reserved ports create tries for one proxy.
const portAttempts = 5

// reserve is ports.Reserve; a test hands out a port taken meanwhile.
var reserve = ports.Reserve

// create creates proxy name. With the in-process server it listens on a
// port below the ephemeral range: a proxy that a fault disables and
// re-enables listens on it again, and an outgoing connection could have
// taken an ephemeral one in between. A port bound by someone else after
// ports.Reserve checked it is given back and another one tried, as the
// servers' starts do. Called with l.mu held.
func (l *Links) create(name, upstream string) (*toxiclient.Proxy, error) {
	if l.server == nil {
		p, err := l.api.CreateProxy(name, net.JoinHostPort(l.host, "0"), upstream)
		if err != nil {
			return nil, fmt.Errorf("links: creating proxy %s: %w", name, err)
		}
		return p, nil
	}
	for attempt := 1; ; attempt++ {
		ps, err := reserve(1)
		if err != nil {
			return nil, fmt.Errorf("links: a port for proxy %s: %w", name, err)
		}
		p, err := l.api.CreateProxy(name, net.JoinHostPort(l.host, strconv.Itoa(ps[0])), upstream)
		if err == nil {
			l.ports = append(l.ports, ps...)
			return p, nil
		}
		ports.Release(ps)
		if !ports.IsAddrInUse(err) || attempt == portAttempts {
			return nil, fmt.Errorf("links: creating proxy %s: %w", name, err)
		}
	}
}

// Get fetches proxy name fresh from the API, so that its Enabled and
// ActiveToxics are current.
func (l *Links) Get(name string) (*toxiclient.Proxy, error) {
	p, err := l.api.Proxy(name)
	if err != nil {
		return nil, fmt.Errorf("links: proxy %s: %w", name, err)
	}
	return p, nil
}

// To names our proxies in front of upstream, sorted.
func (l *Links) To(upstream string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var names []string
	for name, p := range l.proxies {
		if p.upstream == upstream {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// ClearToxics removes every toxic from our proxies and enables those
// disabled.
func (l *Links) ClearToxics() error {
	l.mu.Lock()
	closed := l.closed
	names := make([]string, 0, len(l.proxies))
	for name := range l.proxies {
		names = append(names, name)
	}
	l.mu.Unlock()
	if closed {
		return ErrClosed
	}
	var errs []error
	for _, name := range names {
		p, err := l.Get(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var cuts []string
		for _, t := range p.ActiveToxics {
			if t.Type == "timeout" {
				cuts = append(cuts, t.Name)
				continue
			}
			if err := p.RemoveToxic(t.Name); err != nil {
				errs = append(errs, fmt.Errorf("links: %s: removing toxic %s: %w", name, t.Name, err))
			}
		}
		if err := RemoveCut(p, cuts...); err != nil {
			errs = append(errs, err)
		}
		if !p.Enabled {
			if err := p.Enable(); err != nil {
				errs = append(errs, fmt.Errorf("links: enabling %s: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// RemoveCut removes the timeout toxics names (cuts: they drop what their
// connections carry) from p. Removing a timeout toxic closes the
// connections through it, but toxiproxy (v2.12, link.go RemoveToxic)
// leaves the stage before it feeding the removed toxic's input, which
// nothing reads any more: the next bytes from the other end block that
// stage and the link's reader for good, two goroutines leaked per link.
// So an enabled p is disabled first, which closes its connections while
// the toxic still drains them, and enabled again once the toxics are gone
// (a new connection is refused for those few milliseconds).
func RemoveCut(p *toxiclient.Proxy, names ...string) error {
	if len(names) == 0 {
		return nil
	}
	enabled := p.Enabled
	var errs []error
	if enabled {
		if err := p.Disable(); err != nil {
			return fmt.Errorf("links: disabling %s to remove %v: %w", p.Name, names, err)
		}
	}
	for _, name := range names {
		if err := p.RemoveToxic(name); err != nil {
			errs = append(errs, fmt.Errorf("links: %s: removing toxic %s: %w", p.Name, name, err))
		}
	}
	if enabled {
		if err := p.Enable(); err != nil {
			errs = append(errs, fmt.Errorf("links: enabling %s: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Close deletes our proxies, which cuts every connection through them, and
// stops the in-process server. Idempotent.
func (l *Links) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	names := make([]string, 0, len(l.proxies))
	for name := range l.proxies {
		names = append(names, name)
	}
	l.mu.Unlock()

	var errs []error
	if l.server != nil {
		if err := l.server.Collection.Clear(); err != nil {
			errs = append(errs, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := l.http.Shutdown(ctx); err != nil {
			l.http.Close()
		}
		cancel()
	} else {
		for _, name := range names {
			p, err := l.api.Proxy(name)
			if err == nil {
				err = p.Delete()
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("links: deleting proxy %s: %w", name, err))
			}
		}
	}
	ports.Release(l.ports)
	return errors.Join(errs...)
}

// ResourceName is the name of client's proxy to the protected resource,
// whatever the system under test.
func ResourceName(client string) string { return client + "-resource" }

// CheckName says whether s can name a proxy's client: letters, digits,
// '_', '.' and '-'.
func CheckName(s string) error {
	if s == "" {
		return errors.New("links: empty name")
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == '-':
		default:
			return fmt.Errorf("links: name %q: only letters, digits, '_', '.' and '-' allowed", s)
		}
	}
	return nil
}
