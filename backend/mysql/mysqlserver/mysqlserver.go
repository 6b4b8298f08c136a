// Package mysqlserver runs a real MariaDB server (Debian's mariadb-server,
// MySQL's protocol and GET_LOCK) for a run: made by mariadb-install-db in
// the run directory and started as an OS process (proc: it dies with
// locktest, also after SIGKILL) on 127.0.0.1 and a port of its own, its
// Unix socket in its scratch directory. Every client reaches it over a
// link of its own behind toxiproxy; pause (SIGSTOP), crash (SIGKILL) and
// restart from its data are methods here. As root it runs with
// --user=root, which mariadbd allows when told.
//
// A GET_LOCK lock lasts as long as its session. As with PostgreSQL, TCP
// keepalives cannot end a cut-off client's session here (toxiproxy holds
// the bytes and keeps both sockets open); wait_timeout, set to
// Config.IdleTimeout (whole seconds), does: the server ends a session
// silent that long, and logs it ("Aborted connection ID ... (Got timeout
// reading communication packets)").
package mysqlserver

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	"github.com/go-sql-driver/mysql"

	"github.com/locktest/locktest/internal/links"
	"github.com/locktest/locktest/internal/ports"
	"github.com/locktest/locktest/internal/proc"
	"github.com/locktest/locktest/internal/scratch"
)

// Name is the server's member name.
const Name = "my0"

// Package is what to install when MariaDB is missing.
const Package = "mariadb-server"

const install = "apt-get install " + Package

// Binary is a usable MariaDB installation.
type Binary struct {
	Server, InstallDB string
	Version           string // "10.11.19"
}

var versionRE = regexp.MustCompile(`Ver (\d+\.\d+\.\d+)-MariaDB`)

// Find returns mariadbd (at path, or /usr/sbin's, or on PATH) and
// mariadb-install-db beside it or on PATH; the error is one line that
// says what to install.
func Find(path string) (Binary, error) {
	if path == "" {
		path = "/usr/sbin/mariadbd"
		if _, err := os.Stat(path); err != nil {
			p, err := exec.LookPath("mariadbd")
			if err != nil {
				return Binary{}, fmt.Errorf("mariadbd not found in /usr/sbin nor on PATH (install it: %s)", install)
			}
			path = p
		}
	}
	b := Binary{Server: path}
	inst, err := exec.LookPath("mariadb-install-db")
	if err != nil {
		return Binary{}, fmt.Errorf("mariadb-install-db not found on PATH (install it: %s)", install)
	}
	b.InstallDB = inst
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return Binary{}, fmt.Errorf("%s --version failed: %v (install it: %s)", path, err, install)
	}
	m := versionRE.FindStringSubmatch(string(out))
	if m == nil {
		return Binary{}, fmt.Errorf("%s is not MariaDB: --version said %q (install it: %s)", path, bytes.TrimSpace(out), install)
	}
	b.Version = m[1]
	return b, nil
}

// ForTest returns the installed MariaDB for a test, or skips the test
// saying why.
func ForTest(t interface {
	Helper()
	Skip(args ...any)
}) Binary {
	t.Helper()
	b, err := Find("")
	if err != nil {
		t.Skip("MariaDB not installed (" + install + "): " + err.Error())
	}
	return b
}

// Config says how to run the server.
type Config struct {
	Binary Binary
	// Dir is where its scratch directory goes; LogDir its logs' ("" keeps
	// them in the scratch directory).
	Dir, LogDir string
	// IdleTimeout is wait_timeout, in whole seconds (at least 1).
	IdleTimeout time.Duration
	// Setup is SQL run once the server is ready, one statement an element.
	Setup []string
}

// Server is a started MariaDB server. Safe for concurrent use.
type Server struct {
	cfg   Config
	dir   string
	log   string // its error log, which notes aborted connections
	out   string // its stdout and stderr
	addr  string
	port  []int
	links *links.Links

	// Ready is how long it took from mariadb-install-db's start until it
	// took connections.
	Ready time.Duration

	faultMu sync.Mutex
	mu      sync.Mutex
	p       *proc.Process
	closed  bool

	closeOnce sync.Once
	closeErr  error
}

// ErrClosed is returned by methods of a closed Server.
var ErrClosed = errors.New("mysqlserver: closed")

// Start installs a data directory, starts the server and toxiproxy, and
// returns once it takes connections and Setup has run. On error
// everything started has been stopped.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	cfg.IdleTimeout = max(cfg.IdleTimeout.Round(time.Second), time.Second)
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
	dir, err := scratch.Dir(s.cfg.Dir, "mysql")
	if err != nil {
		return fmt.Errorf("mysqlserver: %w", err)
	}
	s.dir = dir
	logDir := s.cfg.LogDir
	if logDir == "" {
		logDir = dir
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return fmt.Errorf("mysqlserver: %w", err)
	}
	s.log = filepath.Join(logDir, "mariadb-"+Name+".log")
	s.out = filepath.Join(logDir, "mariadb-"+Name+".out")
	if s.links, err = links.Start(nil); err != nil {
		return err
	}
	p, err := proc.Start(proc.Spec{Path: s.cfg.Binary.InstallDB, Dir: dir, Log: s.out, Args: []string{"--no-defaults",
		"--user=" + currentUser(), "--datadir=" + s.data(), "--auth-root-authentication-method=normal", "--skip-test-db"}})
	if err != nil {
		return fmt.Errorf("mysqlserver: mariadb-install-db: %w", err)
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		p.Kill()
		return fmt.Errorf("mysqlserver: mariadb-install-db: %w", ctx.Err())
	}
	if err := p.Err(); err != nil {
		return fmt.Errorf("mysqlserver: mariadb-install-db failed: %v (its log: %s)", err, s.out)
	}
	for attempt := 1; ; attempt++ {
		if err = s.startAttempt(ctx); err == nil || !errors.Is(err, errAddrInUse) || attempt == 5 {
			break
		}
	}
	if err != nil {
		return err
	}
	s.Ready = time.Since(began)
	db, err := s.DB()
	if err != nil {
		return err
	}
	defer db.Close()
	for _, q := range s.cfg.Setup {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("mysqlserver: setup: %w", err)
		}
	}
	return nil
}

func currentUser() string {
	if os.Geteuid() == 0 {
		return "root"
	}
	return strconv.Itoa(os.Geteuid())
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

var errAddrInUse = errors.New("address already in use")

func (s *Server) startAttempt(ctx context.Context) error {
	ports.Release(s.port)
	ps, err := ports.Reserve(1)
	if err != nil {
		return fmt.Errorf("mysqlserver: %w", err)
	}
	s.port = ps
	s.addr = net.JoinHostPort(ports.Host, strconv.Itoa(ps[0]))
	if err := s.startProcess(); err != nil {
		return err
	}
	return s.waitReady(ctx)
}

// args: loopback only, nothing synced, no binary log, no performance
// schema (IS_USED_LOCK tells the observer who holds a lock), aborted
// connections logged, and silent sessions ended after IdleTimeout.
func (s *Server) args() []string {
	return []string{"--no-defaults", "--user=" + currentUser(), "--datadir=" + s.data(),
		"--bind-address=" + ports.Host, "--port=" + strconv.Itoa(s.port[0]), "--socket=" + filepath.Join(s.dir, "sock"),
		"--pid-file=" + filepath.Join(s.dir, "pid"), "--log-error=" + s.log, "--log-warnings=3",
		"--skip-name-resolve", "--skip-log-bin", "--performance-schema=OFF",
		"--innodb-buffer-pool-size=16M", "--innodb-flush-log-at-trx-commit=0", "--max-connections=200",
		"--wait-timeout=" + strconv.Itoa(int(s.cfg.IdleTimeout.Seconds()))}
}

func (s *Server) startProcess() error {
	p, err := proc.Start(proc.Spec{Path: s.cfg.Binary.Server, Args: s.args(), Dir: s.dir, Log: s.out})
	if err != nil {
		return fmt.Errorf("mysqlserver: %w", err)
	}
	s.mu.Lock()
	s.p = p
	s.mu.Unlock()
	return nil
}

func (s *Server) waitReady(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		db, err := s.DB()
		if err == nil {
			err = db.PingContext(ctx)
			db.Close()
			if err == nil {
				return nil
			}
		}
		if p := s.process(); p == nil || p.Exited() {
			last := lastLine(s.log)
			if strings.Contains(last, "Address already in use") || strings.Contains(last, "Do you already have another") {
				return fmt.Errorf("mysqlserver: %s: %w", last, errAddrInUse)
			}
			return fmt.Errorf("mysqlserver: mariadbd exited while starting: %s (its log: %s)", last, s.log)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("mysqlserver: waiting for mariadbd to take connections: %v: %w", err, ctx.Err())
		case <-t.C:
		}
	}
}

// Quiet points the driver's process-wide logger, which otherwise writes
// to stderr (a connection the server dropped), at nothing: a run writes
// nothing to the terminal but its own report.
var Quiet = sync.OnceFunc(func() { mysql.SetLogger(log.New(io.Discard, "", 0)) })

// DB is a direct client of the server (no link), for observers and
// admin: its sessions are not ended for silence.
func (s *Server) DB() (*sql.DB, error) {
	Quiet()
	c := mysql.NewConfig()
	c.User, c.Net, c.Addr = "root", "tcp", s.addr
	c.Timeout, c.ReadTimeout, c.WriteTimeout = time.Second, 2*time.Second, 2*time.Second
	c.Params = map[string]string{"wait_timeout": "28800"}
	conn, err := mysql.NewConnector(c)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(2)
	return db, nil
}

func (s *Server) process() *proc.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p
}

// Pid is the server's process ID.
func (s *Server) Pid() int {
	if p := s.process(); p != nil {
		return p.Pid()
	}
	return 0
}

// LogPath is the server's error log.
func (s *Server) LogPath() string { return s.log }

// IdleTimeout is wait_timeout.
func (s *Server) IdleTimeout() time.Duration { return s.cfg.IdleTimeout }

// Binary is the MariaDB it runs.
func (s *Server) Binary() Binary { return s.cfg.Binary }

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// LinkName is the proxy between client and the server: "c1->my0".
func LinkName(client string) string { return client + "->" + Name }

// Endpoint returns the address of client's link to the server.
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

func (s *Server) fault() (func(), error) {
	s.faultMu.Lock()
	if s.isClosed() {
		s.faultMu.Unlock()
		return nil, ErrClosed
	}
	return s.faultMu.Unlock, nil
}

// Pause freezes the server (SIGSTOP).
func (s *Server) Pause() error {
	unlock, err := s.fault()
	if err != nil {
		return err
	}
	defer unlock()
	return s.process().Stop()
}

// Resume continues it (SIGCONT).
func (s *Server) Resume() error {
	unlock, err := s.fault()
	if err != nil {
		return err
	}
	defer unlock()
	return s.process().Cont()
}

// Crash kills the server (SIGKILL): every session, and its locks, ends.
func (s *Server) Crash() error {
	unlock, err := s.fault()
	if err != nil {
		return err
	}
	defer unlock()
	return s.process().Kill()
}

// Running reports whether the server's process is alive.
func (s *Server) Running() bool {
	p := s.process()
	return p != nil && !p.Exited()
}

// Restart starts the server again from its data (InnoDB recovers its
// tables and sequences); GET_LOCK locks, in memory only, are gone.
func (s *Server) Restart(ctx context.Context) error {
	unlock, err := s.fault()
	if err != nil {
		return err
	}
	defer unlock()
	if err := s.process().Kill(); err != nil {
		return err
	}
	if err := s.startProcess(); err != nil {
		return err
	}
	return s.waitReady(ctx)
}

// Close kills the server, closes the links and removes the data.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.faultMu.Lock()
		s.mu.Lock()
		s.closed = true
		p := s.p
		s.mu.Unlock()
		var errs []error
		if p != nil {
			errs = append(errs, p.Kill())
		}
		if s.links != nil {
			s.links.Close()
		}
		ports.Release(s.port)
		s.faultMu.Unlock()
		if s.dir != "" {
			errs = append(errs, os.RemoveAll(s.dir))
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

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
