// Package serverkit is the plumbing a backend's servers share: a scratch
// directory and log files in the run directory, a start retried on fresh
// loopback ports when one was taken, waiting until a server is ready, a
// setup program run to its end, its OS process (internal/proc: nothing outlives locktest, also after its
// SIGKILL; a pause and a resume are signals), the clients' toxiproxy links,
// and a Close that stops everything once. What a server is, how it is
// configured and when it is ready stay in the backend's own folder.
package serverkit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"

	"github.com/locktest/locktest/internal/links"
	"github.com/locktest/locktest/internal/ports"
	"github.com/locktest/locktest/internal/scratch"
)

// ErrClosed is wrapped by the errors of a closed Base's methods.
var ErrClosed = errors.New("closed")

// Base is what a started set of servers holds besides its servers: its
// directories, its reserved ports, its toxiproxy, and its lifetime (closed
// or not, the lock that serialises its faults with each other and with
// Close). Embed it; its methods are safe for concurrent use.
type Base struct {
	// Name prefixes errors: the backend's server package, "redisserver".
	Name string
	// Dir is the scratch directory, which Close removes; LogDir is where
	// the logs go (the configured one, or Dir).
	Dir, LogDir string
	// Proxies are the clients' links (StartLinks).
	Proxies *links.Links

	toxiLog *LogWriter // nil: toxiproxy's log is discarded

	faultMu sync.Mutex

	mu      sync.Mutex
	closed  bool
	ports   []int
	closers []io.Closer // Track's

	closeOnce sync.Once
	closeErr  error
}

// Open makes the scratch directory under parent (os.TempDir when ""),
// named after kind and this process, so that the next locktest removes it
// should this one die before Close (scratch.Sweep), and the log directory,
// logDir or the scratch directory when "".
func (b *Base) Open(parent, logDir, kind string) error {
	dir, err := scratch.Dir(parent, kind)
	if err != nil {
		return b.errorf("%w", err)
	}
	b.Dir, b.LogDir = dir, logDir
	if b.LogDir == "" {
		b.LogDir = dir
	}
	if err := os.MkdirAll(b.LogDir, 0o755); err != nil {
		return b.errorf("%w", err)
	}
	return nil
}

// StartLinks starts toxiproxy in this process, logging to
// logDir/toxiproxy.log (nowhere when logDir is "").
func (b *Base) StartLinks(logDir string) error {
	if b.toxiLog == nil {
		w, err := OpenLog(logDir, "toxiproxy.log")
		if err != nil {
			return b.errorf("%w", err)
		}
		b.toxiLog = w
	}
	l, err := links.Start(b.toxiLog)
	if err != nil {
		return err
	}
	b.Proxies = l
	return nil
}

// Reserve reserves n free loopback ports until ReleasePorts or Close.
func (b *Base) Reserve(n int) ([]int, error) {
	ps, err := ports.Reserve(n)
	if err != nil {
		return nil, b.errorf("%w", err)
	}
	b.mu.Lock()
	b.ports = append(b.ports, ps...)
	b.mu.Unlock()
	return ps, nil
}

// ReleasePorts gives back every port Reserve reserved.
func (b *Base) ReleasePorts() {
	b.mu.Lock()
	ps := b.ports
	b.ports = nil
	b.mu.Unlock()
	ports.Release(ps)
}

func (b *Base) errorf(format string, args ...any) error {
	return fmt.Errorf(b.Name+": "+format, args...)
}

// Track has Close close c first, before it waits for a fault in progress:
// the clients and subscriptions the set hands out. Once Close has begun it
// closes c at once and fails.
func (b *Base) Track(c io.Closer) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		c.Close()
		return b.errorf("%w", ErrClosed)
	}
	b.closers = append(b.closers, c)
	b.mu.Unlock()
	return nil
}

// Closed reports whether Close has begun.
func (b *Base) Closed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// Check is the error of a method called after Close (wrapping ErrClosed),
// nil before.
func (b *Base) Check() error {
	if b.Closed() {
		return b.errorf("%w", ErrClosed)
	}
	return nil
}

// Fault takes the fault lock, which serialises faults with each other and
// with Close; it fails once Close has begun.
func (b *Base) Fault() (unlock func(), err error) {
	b.faultMu.Lock()
	if err := b.Check(); err != nil {
		b.faultMu.Unlock()
		return nil, err
	}
	return b.faultMu.Unlock, nil
}

// FaultOn looks up server i of servers, the set's, and takes the fault
// lock, for a fault on that server.
func FaultOn[S any](b *Base, servers []S, i int) (s S, unlock func(), err error) {
	if i < 0 || i >= len(servers) {
		return s, nil, b.errorf("no server %d", i)
	}
	if unlock, err = b.Fault(); err != nil {
		return s, nil, err
	}
	return servers[i], unlock, nil
}

// Proxy creates (once) the proxy name, client's link to upstream, and
// returns its address. client names a workload process (links.CheckName).
func (b *Base) Proxy(client, name, upstream string) (string, error) {
	if err := links.CheckName(client); err != nil {
		return "", err
	}
	if err := b.Check(); err != nil {
		return "", err
	}
	return b.Proxies.Proxy(name, upstream)
}

// ResourceProxy creates (once) client's link to the protected resource at
// upstream ("host:port") and returns its address.
func (b *Base) ResourceProxy(client, upstream string) (string, error) {
	return b.Proxy(client, links.ResourceName(client), upstream)
}

// ResourceLink returns client's link to the resource, made by
// ResourceProxy.
func (b *Base) ResourceLink(client string) (*toxiclient.Proxy, error) {
	return b.Proxies.Get(links.ResourceName(client))
}

// ClearToxics heals every client link: it removes all toxics and enables
// every disabled proxy.
func (b *Base) ClearToxics() error {
	if err := b.Check(); err != nil {
		return err
	}
	return b.Proxies.ClearToxics()
}

// Close marks the set closed, closes what Track was given, runs before (if
// set: what else should end before a fault in progress has finished),
// then stop under the fault lock (it kills the processes), releases the
// ports, closes toxiproxy and its log and removes the scratch directory.
// It runs once; later calls return the first's result.
func (b *Base) Close(before func(), stop func() error) error {
	b.closeOnce.Do(func() {
		b.mu.Lock()
		b.closed = true
		closers := b.closers
		b.closers = nil
		b.mu.Unlock()
		for _, c := range closers {
			c.Close() // a client's or subscription's error says only that it is closed
		}
		if before != nil {
			before()
		}
		var errs []error
		b.faultMu.Lock()
		if stop != nil {
			errs = append(errs, stop())
		}
		b.ReleasePorts()
		b.faultMu.Unlock()
		if b.Proxies != nil {
			errs = append(errs, b.Proxies.Close())
		}
		errs = append(errs, b.toxiLog.Close())
		if b.Dir != "" {
			errs = append(errs, os.RemoveAll(b.Dir))
		}
		b.closeErr = errors.Join(errs...)
	})
	return b.closeErr
}
