// Package pgserver runs a real PostgreSQL server for a run, as the system
// under test of a database lock: one primary, made by initdb in the run
// directory and started as an OS process (proc: its process group dies
// with locktest, also after SIGKILL) on 127.0.0.1 and a port of its own,
// with no Unix socket; and, for a failover, a streaming replica made from
// it by pg_basebackup, on a port of its own, replicating over a link of
// its own. Every client reaches the primary over a link of its own behind
// toxiproxy; the faults that strike the servers themselves are methods
// here: pause (SIGSTOP of the postmaster and every backend), crash
// (SIGKILL) and restart from its data, the replication's cut, and the
// failover (the primary killed, the replica promoted, the clients' links
// moved to it).
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
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	"github.com/jackc/pgx/v5"

	"github.com/locktest/locktest/backend/serverkit"
	"github.com/locktest/locktest/internal/ports"
	"github.com/locktest/locktest/internal/proc"
)

// Name is the primary's member name, ReplicaName its streaming replica's.
const (
	Name        = "pg0"
	ReplicaName = "pg1"
)

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
	// where its logs and toxiproxy's go ("" keeps them in the scratch
	// directory).
	Dir, LogDir string
	// IdleTimeout is idle_session_timeout and
	// idle_in_transaction_session_timeout: how long the server lets a
	// session be silent before it ends it.
	IdleTimeout time.Duration
	// Setup is SQL run once the primary is ready (the recipes' tables).
	Setup string
	// Replica adds a streaming replica, pg1, made by pg_basebackup from
	// the primary once Setup has run, replicating through a link of its
	// own (CutReplication), for Failover.
	Replica bool
}

// member is one server: the primary or its replica, each with its own
// data directory, port, log and process.
type member struct {
	name, data, log string
	port            int
	addr            string
	proc            serverkit.Proc
}

// Server is a started PostgreSQL primary, and its replica if asked for.
// Its methods are safe for concurrent use.
type Server struct {
	serverkit.Base
	cfg     Config
	members []*member
	// unprivileged: locktest is root, which PostgreSQL refuses.
	unprivileged bool

	// Ready is how long the servers took from initdb's start until they
	// took connections (the replica's base backup and start included).
	Ready time.Duration

	mu      sync.Mutex
	primary int // the member that takes writes: 0, or 1 after Failover
}

// startAttempts is how often Start tries a fresh port when the server
// finds its port taken.
const startAttempts = 5

// replicationLink names the replica's link to the primary.
const replicationLink = ReplicaName + "->" + Name + " replication"

// Start makes a data directory with initdb, starts the server and
// toxiproxy (and the replica, with Config.Replica), and returns once they
// take connections and Setup has run. On error everything started has
// been stopped.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 2 * time.Second
	}
	s := &Server{cfg: cfg, Base: serverkit.Base{Name: "pgserver"}}
	if err := serverkit.Start(ctx, time.Minute, s.start, s.Close); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) start(ctx context.Context) error {
	began := time.Now()
	if err := s.Open(s.cfg.Dir, s.cfg.LogDir, "postgres"); err != nil {
		return err
	}
	s.unprivileged = os.Geteuid() == 0
	names := []string{Name}
	if s.cfg.Replica {
		names = append(names, ReplicaName)
	}
	for _, name := range names {
		m := &member{name: name, data: filepath.Join(s.Dir, "data-"+name), log: filepath.Join(s.LogDir, "postgres-"+name+".log")}
		m.proc.Signal = signal
		if err := os.WriteFile(m.log, nil, 0o644); err != nil {
			return fmt.Errorf("pgserver: %w", err)
		}
		s.members = append(s.members, m)
	}
	if err := s.StartLinks(s.cfg.LogDir); err != nil {
		return err
	}
	primary := s.members[0]
	if err := s.run(ctx, primary, "initdb", s.cfg.Binary.Initdb(),
		"-D", primary.data, "-U", User, "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C", "--no-instructions"); err != nil {
		return err
	}
	if err := s.startMember(ctx, primary); err != nil {
		return err
	}
	if s.cfg.Setup != "" {
		c, err := s.Connect(ctx)
		if err != nil {
			return err
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(ctx, s.cfg.Setup); err != nil {
			return fmt.Errorf("pgserver: setup: %w", err)
		}
	}
	if s.cfg.Replica {
		if err := s.startReplica(ctx); err != nil {
			return err
		}
	}
	s.Ready = time.Since(began)
	return nil
}

// run runs a PostgreSQL program to its end, its output in m's log.
func (s *Server) run(ctx context.Context, m *member, what, path string, args ...string) error {
	return serverkit.Run(ctx, "pgserver: "+what, proc.Spec{Path: path, Args: args, Dir: s.Dir, Log: m.log, Unprivileged: s.unprivileged})
}

// startReplica makes pg1's data directory by pg_basebackup from the
// primary, through the replication link (-R writes standby.signal and the
// link's address as primary_conninfo), and starts it as a hot standby.
func (s *Server) startReplica(ctx context.Context) error {
	via, err := s.Proxies.Proxy(replicationLink, s.members[0].addr)
	if err != nil {
		return err
	}
	host, port, _ := net.SplitHostPort(via)
	r := s.members[1]
	if err := s.run(ctx, r, "pg_basebackup", s.cfg.Binary.Basebackup(),
		"-h", host, "-p", port, "-U", User, "-D", r.data, "-R", "-X", "stream", "-c", "fast", "--no-sync"); err != nil {
		return err
	}
	return s.startMember(ctx, r)
}

// startMember starts m on a fresh port, and again on another when the
// port was taken meanwhile. A port taken stays reserved until Close:
// ReleasePorts would give back the other member's too.
func (s *Server) startMember(ctx context.Context, m *member) error {
	return serverkit.Retry(startAttempts, func(int) error {
		ps, err := s.Reserve(1)
		if err != nil {
			return err
		}
		m.port = ps[0]
		m.addr = net.JoinHostPort(ports.Host, strconv.Itoa(m.port))
		if err := s.startProcess(m); err != nil {
			return err
		}
		return s.waitReady(ctx, m)
	}, nil)
}

// args is how a member runs: on loopback only, no Unix socket, nothing
// synced to disk (a crash here kills the processes, not the machine: the
// kernel keeps what they wrote), every session's end logged with its pid,
// and silent sessions ended after IdleTimeout. Commits stay synchronous:
// an asynchronous one is acknowledged before its WAL leaves the server's
// memory, and a crash lost it (a lease's fence went back, a token was
// granted twice).
func (s *Server) args(m *member) []string {
	idle := strconv.FormatInt(s.cfg.IdleTimeout.Milliseconds(), 10)
	args := []string{"-D", m.data, "-p", strconv.Itoa(m.port)}
	for _, kv := range []string{
		"listen_addresses=" + ports.Host, "unix_socket_directories=",
		"fsync=off", "full_page_writes=off",
		"shared_buffers=16MB", "max_connections=200", "autovacuum=off",
		"logging_collector=off", "log_line_prefix=%m [%p] %a ", "log_disconnections=on",
		"idle_session_timeout=" + idle, "idle_in_transaction_session_timeout=" + idle,
		// A replica that loses its primary asks again soon (default 5 s).
		"wal_retrieve_retry_interval=200ms",
	} {
		args = append(args, "-c", kv)
	}
	return args
}

func (s *Server) startProcess(m *member) error {
	if err := m.proc.Start(proc.Spec{Path: s.cfg.Binary.Postgres(), Args: s.args(m), Dir: s.Dir, Log: m.log, Unprivileged: s.unprivileged}); err != nil {
		return fmt.Errorf("pgserver: %w", err)
	}
	return nil
}

// waitReady polls until m takes a connection, or its process exits (the
// error quotes its log), or ctx ends.
func (s *Server) waitReady(ctx context.Context, m *member) error {
	w := serverkit.Wait{What: "pgserver: waiting for postgres " + m.name + " to take connections",
		Proc: &m.proc, Who: "pgserver: postgres " + m.name, InUse: []string{"could not bind"}}
	return w.Until(ctx, func(ctx context.Context) error {
		c, err := connect(ctx, m.addr)
		if err != nil {
			return err
		}
		return c.Close(context.Background())
	})
}

// ConnString is the address of a connection to addr, for pgx.
func ConnString(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	return fmt.Sprintf("host=%s port=%s user=%s dbname=%s sslmode=disable connect_timeout=2", host, port, User, Database)
}

// Connect makes a direct connection to the primary (the promoted replica
// after Failover; no link, so no fault touches it), for observers and
// admin: the server does not end it when it is silent.
func (s *Server) Connect(ctx context.Context) (*pgx.Conn, error) {
	return connect(ctx, s.current().addr)
}

// ConnectMember makes a direct connection to member i, the replica too
// (read-only while it replicates).
func (s *Server) ConnectMember(ctx context.Context, i int) (*pgx.Conn, error) {
	m, err := s.member(i)
	if err != nil {
		return nil, err
	}
	return connect(ctx, m.addr)
}

func connect(ctx context.Context, addr string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(ConnString(addr))
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["idle_session_timeout"] = "0"
	cfg.RuntimeParams["idle_in_transaction_session_timeout"] = "0"
	cfg.RuntimeParams["application_name"] = "locktest-observer"
	return pgx.ConnectConfig(ctx, cfg)
}

// current is the member that takes writes.
func (s *Server) current() *member {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.members[s.primary]
}

// Members names the members: pg0, and pg1 with a replica.
func (s *Server) Members() []string {
	names := make([]string, len(s.members))
	for i, m := range s.members {
		names[i] = m.name
	}
	return names
}

// member returns member i, or an error naming it.
func (s *Server) member(i int) (*member, error) {
	if i < 0 || i >= len(s.members) {
		return nil, fmt.Errorf("pgserver: no member %d", i)
	}
	return s.members[i], nil
}

// Pid is member i's postmaster's process ID (after a restart, the new
// one's); 0 when there is none.
func (s *Server) Pid(i int) int {
	if m, err := s.member(i); err == nil {
		return m.proc.Pid()
	}
	return 0
}

// Primary names the member that takes writes: pg0, or pg1 after Failover.
func (s *Server) Primary() string { return s.current().name }

// Addr is the primary's direct address, for admin.
func (s *Server) Addr() string { return s.current().addr }

// LogPath is the primary's log (the promoted replica's after Failover).
func (s *Server) LogPath() string { return s.current().log }

// IdleTimeout is how long the server lets a session be silent.
func (s *Server) IdleTimeout() time.Duration { return s.cfg.IdleTimeout }

// Binary is the PostgreSQL it runs.
func (s *Server) Binary() Binary { return s.cfg.Binary }

// LinkName is the proxy between client and the server: "c1->pg0". After
// Failover it leads to the promoted replica, under the same name.
func LinkName(client string) string { return client + "->" + Name }

// Endpoint returns the address of client's link to the primary, creating
// it on first use (to the promoted replica after Failover).
func (s *Server) Endpoint(client string) (string, error) {
	// Every link is registered with pg0's address; Failover moves them.
	ep, err := s.Proxy(client, LinkName(client), s.members[0].addr)
	if err != nil {
		return "", err
	}
	if cur := s.current(); cur != s.members[0] {
		if err := s.retarget(LinkName(client), cur.addr); err != nil {
			return "", err
		}
	}
	return ep, nil
}

// retarget points proxy name at upstream, if it points elsewhere:
// toxiproxy closes its connections and listens again on the same address,
// its toxics kept.
func (s *Server) retarget(name, upstream string) error {
	p, err := s.Proxies.Get(name)
	if err != nil {
		return err
	}
	if p.Upstream == upstream {
		return nil
	}
	p.Upstream = upstream
	if err := p.Save(); err != nil {
		return fmt.Errorf("pgserver: moving %s to %s: %w", name, upstream, err)
	}
	return nil
}

// Links returns client's link to the server, fetched fresh.
func (s *Server) Links(client string) ([]*toxiclient.Proxy, error) {
	if _, err := s.Endpoint(client); err != nil {
		return nil, err
	}
	p, err := s.Proxies.Get(LinkName(client))
	if err != nil {
		return nil, err
	}
	return []*toxiclient.Proxy{p}, nil
}

// Pause freezes member i (SIGSTOP): the postmaster and every backend
// (signalAll). Its timers stop with it: a silent session is ended only
// once it resumes.
func (s *Server) Pause(i int) error {
	m, unlock, err := serverkit.FaultOn(&s.Base, s.members, i)
	if err != nil {
		return err
	}
	defer unlock()
	return m.proc.Pause()
}

// Resume continues member i after Pause.
func (s *Server) Resume(i int) error {
	m, unlock, err := serverkit.FaultOn(&s.Base, s.members, i)
	if err != nil {
		return err
	}
	defer unlock()
	return m.proc.Resume()
}

// Crash kills member i (SIGKILL of its postmaster and every backend) and
// waits until it has exited: every session ends, and with it every
// advisory lock.
func (s *Server) Crash(i int) error {
	m, unlock, err := serverkit.FaultOn(&s.Base, s.members, i)
	if err != nil {
		return err
	}
	defer unlock()
	return m.proc.Kill()
}

// signal is the members' Proc.Signal: SIGKILL by kill, the others by
// signalAll.
func signal(p *proc.Process, sig syscall.Signal) error {
	if sig == syscall.SIGKILL {
		return kill(p)
	}
	return signalAll(p, sig)
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

// Running reports whether member i's process is alive (maybe paused).
func (s *Server) Running(i int) bool {
	m, err := s.member(i)
	return err == nil && m.proc.Running()
}

// Restart starts member i again from its data on its port, killing it
// first if it runs, and returns once it takes connections: it recovers its
// tables and sequences from its WAL; advisory locks, which live in memory
// only, are gone. A replica goes on streaming from the primary; a primary
// lost to Failover comes back on its own, a primary no link leads to.
func (s *Server) Restart(ctx context.Context, i int) error {
	m, unlock, err := serverkit.FaultOn(&s.Base, s.members, i)
	if err != nil {
		return err
	}
	defer unlock()
	if err := m.proc.Kill(); err != nil {
		return err
	}
	if err := s.startProcess(m); err != nil {
		return err
	}
	return s.waitReady(ctx, m)
}

// CutReplication holds the replication link's data both ways, its
// connection left open: what the primary writes from then on (rows,
// sequences' WAL) does not reach the replica. Advisory locks never do.
func (s *Server) CutReplication() error {
	if !s.cfg.Replica {
		return errors.New("pgserver: no replica")
	}
	unlock, err := s.Fault()
	if err != nil {
		return err
	}
	defer unlock()
	p, err := s.Proxies.Get(replicationLink)
	if err != nil {
		return err
	}
	for _, dir := range []string{"upstream", "downstream"} {
		name := "replication-cut-" + dir
		if slices.ContainsFunc(p.ActiveToxics, func(t toxiclient.Toxic) bool { return t.Name == name }) {
			continue
		}
		if _, err := p.AddToxic(name, "timeout", dir, 1, toxiclient.Attributes{"timeout": 0}); err != nil {
			return fmt.Errorf("pgserver: cutting replication: %w", err)
		}
	}
	return nil
}

// Failover kills the primary pg0 (SIGKILL, every backend with it), has
// the replica pg1 promoted (pg_promote(), which returns once it has left
// recovery and takes writes), and moves every client's link to it. It
// returns how long from the kill until the links were moved. Once only:
// pg1 has no replica of its own.
func (s *Server) Failover(ctx context.Context) (time.Duration, error) {
	if !s.cfg.Replica {
		return 0, errors.New("pgserver: no replica to fail over to")
	}
	unlock, err := s.Fault()
	if err != nil {
		return 0, err
	}
	defer unlock()
	if s.current() != s.members[0] {
		return 0, errors.New("pgserver: failed over already")
	}
	old, replica := s.members[0], s.members[1]
	began := time.Now()
	if err := old.proc.Kill(); err != nil {
		return 0, err
	}
	c, err := connect(ctx, replica.addr)
	if err != nil {
		return 0, fmt.Errorf("pgserver: failover: reaching %s: %w", replica.name, err)
	}
	defer c.Close(context.Background())
	var promoted bool
	if err := c.QueryRow(ctx, "SELECT pg_promote(true, 30)").Scan(&promoted); err != nil {
		return 0, fmt.Errorf("pgserver: failover: pg_promote on %s: %w", replica.name, err)
	}
	if !promoted {
		return 0, fmt.Errorf("pgserver: failover: %s was not promoted within 30 s (its log: %s)", replica.name, replica.log)
	}
	s.mu.Lock()
	s.primary = 1
	s.mu.Unlock()
	var errs []error
	for _, name := range s.Proxies.To(old.addr) {
		if name != replicationLink {
			errs = append(errs, s.retarget(name, replica.addr))
		}
	}
	return time.Since(began), errors.Join(errs...)
}

// FailedOver reports whether Failover promoted the replica.
func (s *Server) FailedOver() bool { return s.current() != s.members[0] }

// Close kills the servers, closes the links and removes the data.
// Idempotent; safe after a failed Start.
func (s *Server) Close() error {
	return s.Base.Close(nil, func() error {
		var errs []error
		for _, m := range s.members {
			errs = append(errs, m.proc.Kill())
		}
		return errors.Join(errs...)
	})
}
