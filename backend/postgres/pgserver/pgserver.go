// Package pgserver runs a real PostgreSQL server for a run, as the system
// under test of a database lock: one primary, made by initdb in the run
// directory and started as an OS process (proc: its process group dies
// with locktest, also after SIGKILL) on 127.0.0.1 and a port of its own,
// with no Unix socket. Every client reaches it over a link of its own
// behind toxiproxy; the faults that strike the server itself are methods
// here: pause (SIGSTOP of the whole process group: the postmaster and
// every backend), crash (SIGKILL) and restart from its data.
//
// PostgreSQL refuses to run as root: when locktest is root, initdb and the
// server run as nobody in a user namespace of their own, where nobody is
// root outside (proc.Spec.Unprivileged): the server runs, and its files
// are locktest's, in the run directory whatever its permissions.
//
// A session's advisory locks last as long as the server believes the
// session lives. TCP keepalives cannot tell it otherwise here: a cut link
// is a toxiproxy that holds the bytes and keeps both sockets open, and its
// kernel answers the server's probes. What ends a cut-off client's session
// is idle_session_timeout (and idle_in_transaction_session_timeout for one
// that holds a transaction open), set to Config.IdleTimeout: a holder must
// speak within it to keep its session, and one that cannot (cut off,
// paused) loses it, and its locks, that long after it last spoke. The
// server logs each such end (LogPath) with the backend's pid.
package pgserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	"github.com/jackc/pgx/v5"

	"github.com/locktest/locktest/internal/links"
	"github.com/locktest/locktest/internal/ports"
	"github.com/locktest/locktest/internal/proc"
	"github.com/locktest/locktest/internal/scratch"
)

// Name is the server's member name.
const Name = "pg0"

// User and Database are what every connection uses (trust
// authentication on loopback).
const (
	User     = "postgres"
	Database = "postgres"
)

// Config says how to run the server.
type Config struct {
	Binary Binary
	// Dir is where its scratch directory goes (the run directory); LogDir
	// where its log and toxiproxy's go ("" keeps them in the scratch
	// directory).
	Dir, LogDir string
	// IdleTimeout is idle_session_timeout and
	// idle_in_transaction_session_timeout: how long the server lets a
	// session be silent before it ends it.
	IdleTimeout time.Duration
	// Setup is SQL run once the server is ready (the recipes' tables).
	Setup string
}

// Server is a started PostgreSQL server. Its methods are safe for
// concurrent use.
type Server struct {
	cfg  Config
	dir  string // scratch: data/ beneath
	data string
	log  string
	addr string
	port []int
	// unprivileged: locktest is root, which PostgreSQL refuses.
	unprivileged bool
	links        *links.Links
	tpLog        *logWriter

	// Ready is how long the server took from initdb's start until it took
	// connections.
	Ready time.Duration

	faultMu sync.Mutex
	mu      sync.Mutex
	p       *proc.Process
	closed  bool

	closeOnce sync.Once
	closeErr  error
}

// ErrClosed is returned by methods of a closed Server.
var ErrClosed = errors.New("pgserver: closed")

// startAttempts is how often Start tries a fresh port when the server
// finds its port taken.
const startAttempts = 5

// Start makes a data directory with initdb, starts the server and
// toxiproxy, and returns once the server takes connections and Setup has
// run. On error everything started has been stopped.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 2 * time.Second
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Minute)
		defer cancel()
	}
	s := &Server{cfg: cfg}
	if err := s.start(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Server) start(ctx context.Context) error {
	began := time.Now()
	dir, err := scratch.Dir(s.cfg.Dir, "postgres")
	if err != nil {
		return fmt.Errorf("pgserver: %w", err)
	}
	s.dir = dir
	s.data = filepath.Join(dir, "data")
	s.unprivileged = os.Geteuid() == 0
	logDir := s.cfg.LogDir
	if logDir == "" {
		logDir = dir
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return fmt.Errorf("pgserver: %w", err)
	}
	s.log = filepath.Join(logDir, "postgres-"+Name+".log")
	if err := os.WriteFile(s.log, nil, 0o644); err != nil {
		return fmt.Errorf("pgserver: %w", err)
	}
	if s.cfg.LogDir != "" {
		f, err := os.Create(filepath.Join(logDir, "toxiproxy.log"))
		if err != nil {
			return fmt.Errorf("pgserver: %w", err)
		}
		s.tpLog = &logWriter{f: f}
	}
	var logTo io.Writer
	if s.tpLog != nil {
		logTo = s.tpLog
	}
	if s.links, err = links.Start(logTo); err != nil {
		return err
	}
	if err := s.initdb(ctx); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		err = s.startAttempt(ctx)
		if err == nil || !errors.Is(err, errAddrInUse) || attempt == startAttempts {
			break
		}
	}
	if err != nil {
		return err
	}
	s.Ready = time.Since(began)
	if s.cfg.Setup == "" {
		return nil
	}
	c, err := s.Connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, s.cfg.Setup); err != nil {
		return fmt.Errorf("pgserver: setup: %w", err)
	}
	return nil
}

// initdb makes the data directory.
func (s *Server) initdb(ctx context.Context) error {
	p, err := proc.Start(proc.Spec{Path: s.cfg.Binary.Initdb(), Dir: s.dir, Log: s.log, Unprivileged: s.unprivileged,
		Args: []string{"-D", s.data, "-U", User, "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C", "--no-instructions"}})
	if err != nil {
		return fmt.Errorf("pgserver: initdb: %w", err)
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		p.Kill()
		return fmt.Errorf("pgserver: initdb: %w", ctx.Err())
	}
	if err := p.Err(); err != nil {
		return fmt.Errorf("pgserver: initdb failed: %v: %s (its log: %s)", err, lastLine(s.log), s.log)
	}
	return nil
}

// errAddrInUse marks a start that failed because its port was taken.
var errAddrInUse = errors.New("address already in use")

func (s *Server) startAttempt(ctx context.Context) error {
	ports.Release(s.port)
	ps, err := ports.Reserve(1)
	if err != nil {
		return fmt.Errorf("pgserver: %w", err)
	}
	s.port = ps
	s.addr = net.JoinHostPort(ports.Host, strconv.Itoa(ps[0]))
	if err := s.startProcess(); err != nil {
		return err
	}
	return s.waitReady(ctx)
}

// args is how the server runs: on loopback only, no Unix socket, nothing
// synced to disk (a crash here kills the processes, not the machine: the
// kernel keeps what they wrote), every session's end logged with its pid,
// and silent sessions ended after IdleTimeout.
func (s *Server) args() []string {
	idle := strconv.FormatInt(s.cfg.IdleTimeout.Milliseconds(), 10)
	args := []string{"-D", s.data, "-p", strconv.Itoa(s.port[0])}
	for _, kv := range []string{
		"listen_addresses=" + ports.Host, "unix_socket_directories=",
		"fsync=off", "synchronous_commit=off", "full_page_writes=off",
		"shared_buffers=16MB", "max_connections=200", "autovacuum=off",
		"logging_collector=off", "log_line_prefix=%m [%p] %a ", "log_disconnections=on",
		"idle_session_timeout=" + idle, "idle_in_transaction_session_timeout=" + idle,
	} {
		args = append(args, "-c", kv)
	}
	return args
}

func (s *Server) startProcess() error {
	p, err := proc.Start(proc.Spec{Path: s.cfg.Binary.Postgres(), Args: s.args(), Dir: s.dir, Log: s.log, Unprivileged: s.unprivileged})
	if err != nil {
		return fmt.Errorf("pgserver: %w", err)
	}
	s.mu.Lock()
	s.p = p
	s.mu.Unlock()
	return nil
}

// waitReady polls until the server takes a connection, or its process
// exits (the error quotes its log), or ctx ends.
func (s *Server) waitReady(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		c, err := s.Connect(ctx)
		if err == nil {
			c.Close(context.Background())
			return nil
		}
		if p := s.process(); p == nil || p.Exited() {
			last := lastLine(s.log)
			if strings.Contains(last, "Address already in use") || strings.Contains(last, "could not bind") {
				return fmt.Errorf("pgserver: %s: %w", last, errAddrInUse)
			}
			return fmt.Errorf("pgserver: postgres exited while starting: %s (its log: %s)", last, s.log)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgserver: waiting for postgres to take connections: %v: %w", err, ctx.Err())
		case <-t.C:
		}
	}
}

// ConnString is the address of a connection to addr, for pgx.
func ConnString(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	return fmt.Sprintf("host=%s port=%s user=%s dbname=%s sslmode=disable connect_timeout=2", host, port, User, Database)
}

// Connect makes a direct connection to the server (no link, so no fault
// touches it), for observers and admin: the server does not end it when
// it is silent.
func (s *Server) Connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(ConnString(s.addr))
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["idle_session_timeout"] = "0"
	cfg.RuntimeParams["idle_in_transaction_session_timeout"] = "0"
	cfg.RuntimeParams["application_name"] = "locktest-observer"
	return pgx.ConnectConfig(ctx, cfg)
}

func (s *Server) process() *proc.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p
}

// Pid is the postmaster's process ID (after a restart, the new one's).
func (s *Server) Pid() int {
	if p := s.process(); p != nil {
		return p.Pid()
	}
	return 0
}

// Addr is the direct address, for admin.
func (s *Server) Addr() string { return s.addr }

// LogPath is the server's log.
func (s *Server) LogPath() string { return s.log }

// IdleTimeout is how long the server lets a session be silent.
func (s *Server) IdleTimeout() time.Duration { return s.cfg.IdleTimeout }

// Binary is the PostgreSQL it runs.
func (s *Server) Binary() Binary { return s.cfg.Binary }

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// LinkName is the proxy between client and the server: "c1->pg0".
func LinkName(client string) string { return client + "->" + Name }

// Endpoint returns the address of client's link to the server, creating
// it on first use.
func (s *Server) Endpoint(client string) (string, error) {
	if err := links.CheckName(client); err != nil {
		return "", err
	}
	if s.isClosed() {
		return "", ErrClosed
	}
	return s.links.Proxy(LinkName(client), s.addr)
}

// Links returns client's link to the server, fetched fresh.
func (s *Server) Links(client string) ([]*toxiclient.Proxy, error) {
	if _, err := s.Endpoint(client); err != nil {
		return nil, err
	}
	p, err := s.links.Get(LinkName(client))
	if err != nil {
		return nil, err
	}
	return []*toxiclient.Proxy{p}, nil
}

// ResourceProxy creates (once) client's link to the resource at upstream.
func (s *Server) ResourceProxy(client, upstream string) (string, error) {
	if err := links.CheckName(client); err != nil {
		return "", err
	}
	if s.isClosed() {
		return "", ErrClosed
	}
	return s.links.Proxy(links.ResourceName(client), upstream)
}

// ResourceLink returns client's link to the resource.
func (s *Server) ResourceLink(client string) (*toxiclient.Proxy, error) {
	return s.links.Get(links.ResourceName(client))
}

// ClearToxics heals every link.
func (s *Server) ClearToxics() error {
	if s.isClosed() {
		return ErrClosed
	}
	return s.links.ClearToxics()
}

// fault takes the fault lock; it fails on a closed server.
func (s *Server) fault() (func(), error) {
	s.faultMu.Lock()
	if s.isClosed() {
		s.faultMu.Unlock()
		return nil, ErrClosed
	}
	return s.faultMu.Unlock, nil
}

// Pause freezes the server (SIGSTOP): the postmaster and every backend
// (signalAll). Its timers stop with it: a silent session
// is ended only once it resumes.
func (s *Server) Pause() error {
	unlock, err := s.fault()
	if err != nil {
		return err
	}
	defer unlock()
	return signalAll(s.process(), syscall.SIGSTOP)
}

// Resume continues the server after Pause.
func (s *Server) Resume() error {
	unlock, err := s.fault()
	if err != nil {
		return err
	}
	defer unlock()
	return signalAll(s.process(), syscall.SIGCONT)
}

// Crash kills the server (SIGKILL of the process group) and waits until it
// has exited: every session ends, and with it every advisory lock.
func (s *Server) Crash() error {
	unlock, err := s.fault()
	if err != nil {
		return err
	}
	defer unlock()
	return kill(s.process())
}

// signalAll sends sig to the postmaster and to each of its children's
// process groups: PostgreSQL makes every child a group leader of its own
// (setsid in InitPostmasterChild), so a signal to the postmaster's group
// reaches none of the backends that serve the sessions. The postmaster is
// stopped first, so that it forks no child the list misses.
func signalAll(p *proc.Process, sig syscall.Signal) error {
	if p.Exited() {
		return proc.ErrExited
	}
	if err := syscall.Kill(p.Pid(), syscall.SIGSTOP); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("pgserver: %w", err)
	}
	kids := proc.Children(p.Pid())
	for _, k := range kids {
		if err := syscall.Kill(-k, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("pgserver: %v to backend %d: %w", sig, k, err)
		}
	}
	if sig == syscall.SIGSTOP {
		return nil
	}
	if err := syscall.Kill(-p.Pid(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("pgserver: %v to process %d: %w", sig, p.Pid(), err)
	}
	return nil
}

// kill kills the postmaster and every backend (see signalAll) and waits
// until all have exited: a backend still dying holds the shared memory,
// and a restart would find it in use ("Terminate any old server
// processes").
func kill(p *proc.Process) error {
	if p.Exited() {
		return nil
	}
	if err := syscall.Kill(p.Pid(), syscall.SIGSTOP); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("pgserver: %w", err)
	}
	kids := proc.Children(p.Pid())
	for _, k := range kids {
		syscall.Kill(-k, syscall.SIGKILL) // gone already: nothing to do
	}
	if err := p.Kill(); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for slices.ContainsFunc(kids, proc.Alive) || len(proc.Group(p.Pid()).Pids) > 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("pgserver: the server's processes outlived SIGKILL by 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// Running reports whether the server's process is alive (maybe paused).
func (s *Server) Running() bool {
	p := s.process()
	return p != nil && !p.Exited()
}

// Restart starts the server again from its data on its port, killing it
// first if it runs, and returns once it takes connections: it recovers its
// tables and sequences from its WAL; advisory locks, which live in memory
// only, are gone.
func (s *Server) Restart(ctx context.Context) error {
	unlock, err := s.fault()
	if err != nil {
		return err
	}
	defer unlock()
	if err := kill(s.process()); err != nil {
		return err
	}
	if err := s.startProcess(); err != nil {
		return err
	}
	return s.waitReady(ctx)
}

// Close kills the server, closes the links and removes the data.
// Idempotent; safe after a failed Start.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.faultMu.Lock()
		s.mu.Lock()
		s.closed = true
		p := s.p
		s.mu.Unlock()
		var errs []error
		if p != nil {
			errs = append(errs, kill(p))
		}
		if s.links != nil {
			s.links.Close()
		}
		ports.Release(s.port)
		s.faultMu.Unlock()
		if s.tpLog != nil {
			errs = append(errs, s.tpLog.Close())
		}
		if s.dir != "" {
			errs = append(errs, os.RemoveAll(s.dir))
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// logWriter is toxiproxy's log file; it drops what is written after
// Close (toxiproxy's goroutines may still log as they wind down).
type logWriter struct {
	mu sync.Mutex
	f  *os.File
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return len(p), nil
	}
	return w.f.Write(p)
}

func (w *logWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	f := w.f
	w.f = nil
	return f.Close()
}

// lastLine is the last non-empty line of a log file.
func lastLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return string(b)
}
