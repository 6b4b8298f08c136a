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
	"context"
	"database/sql"
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

	"github.com/locktest/locktest/backend/serverkit"
	"github.com/locktest/locktest/internal/ports"
	"github.com/locktest/locktest/internal/proc"
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
	out, err := serverkit.Version(path, install)
	if err != nil {
		return Binary{}, err
	}
	m := versionRE.FindStringSubmatch(out)
	if m == nil {
		return Binary{}, fmt.Errorf("%s is not MariaDB: --version said %q (install it: %s)", path, strings.TrimSpace(out), install)
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
	serverkit.Base
	cfg  Config
	log  string // its error log, which notes aborted connections
	out  string // its stdout and stderr
	addr string
	proc serverkit.Proc

	// Ready is how long it took from mariadb-install-db's start until it
	// took connections.
	Ready time.Duration
}

// Start installs a data directory, starts the server and toxiproxy, and
// returns once it takes connections and Setup has run. On error
// everything started has been stopped.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	cfg.IdleTimeout = max(cfg.IdleTimeout.Round(time.Second), time.Second)
	s := &Server{cfg: cfg, Base: serverkit.Base{Name: "mysqlserver"}}
	if err := serverkit.Start(ctx, time.Minute, s.start, s.Close); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) start(ctx context.Context) error {
	began := time.Now()
	if err := s.Open(s.cfg.Dir, s.cfg.LogDir, "mysql"); err != nil {
		return err
	}
	s.log = filepath.Join(s.LogDir, "mariadb-"+Name+".log")
	s.out = filepath.Join(s.LogDir, "mariadb-"+Name+".out")
	s.proc.Log = s.log
	if err := s.StartLinks(""); err != nil {
		return err
	}
	// Temporary tables go to the scratch directory, not the shared /tmp:
	// bootstraps at once there failed one time in eight here ("Unknown
	// table 'mysql.tmp_user_sys'").
	if err := serverkit.Run(ctx, "mysqlserver: mariadb-install-db", proc.Spec{Path: s.cfg.Binary.InstallDB, Dir: s.Dir, Log: s.out, Args: []string{"--no-defaults",
		"--user=" + currentUser(), "--datadir=" + s.data(), "--tmpdir=" + s.Dir, "--auth-root-authentication-method=normal", "--skip-test-db"}}); err != nil {
		return err
	}
	if err := serverkit.Retry(5, func(int) error { return s.startAttempt(ctx) }, nil); err != nil {
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

func (s *Server) data() string { return filepath.Join(s.Dir, "data") }

func (s *Server) startAttempt(ctx context.Context) error {
	s.ReleasePorts()
	ps, err := s.Reserve(1)
	if err != nil {
		return err
	}
	s.addr = net.JoinHostPort(ports.Host, strconv.Itoa(ps[0]))
	if err := s.startProcess(); err != nil {
		return err
	}
	return s.waitReady(ctx)
}

// args: loopback only, temporary tables in the scratch directory, no
// binary log, no performance schema (IS_USED_LOCK tells the observer who
// holds a lock), aborted connections logged, and silent sessions ended
// after IdleTimeout. The redo log is written to the kernel at each commit
// and synced once a second: a crash kills the process, not the machine,
// and loses no acknowledged commit (written once a second, it lost them,
// and the fencing sequence went back).
func (s *Server) args() []string {
	return []string{"--no-defaults", "--user=" + currentUser(), "--datadir=" + s.data(), "--tmpdir=" + s.Dir,
		"--bind-address=" + ports.Host, "--port=" + s.port(), "--socket=" + filepath.Join(s.Dir, "sock"),
		"--pid-file=" + filepath.Join(s.Dir, "pid"), "--log-error=" + s.log, "--log-warnings=3",
		"--skip-name-resolve", "--skip-log-bin", "--performance-schema=OFF",
		"--innodb-buffer-pool-size=16M", "--innodb-flush-log-at-trx-commit=2", "--max-connections=200",
		"--wait-timeout=" + strconv.Itoa(int(s.cfg.IdleTimeout.Seconds()))}
}

func (s *Server) port() string {
	_, port, _ := net.SplitHostPort(s.addr)
	return port
}

func (s *Server) startProcess() error {
	if err := s.proc.Start(proc.Spec{Path: s.cfg.Binary.Server, Args: s.args(), Dir: s.Dir, Log: s.out}); err != nil {
		return fmt.Errorf("mysqlserver: %w", err)
	}
	return nil
}

func (s *Server) waitReady(ctx context.Context) error {
	w := serverkit.Wait{What: "mysqlserver: waiting for mariadbd to take connections",
		Proc: &s.proc, Who: "mysqlserver: mariadbd", InUse: []string{"Do you already have another"}}
	return w.Until(ctx, func(ctx context.Context) error {
		db, err := s.DB()
		if err != nil {
			return err
		}
		defer db.Close()
		return db.PingContext(ctx)
	})
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

// Pid is the server's process ID.
func (s *Server) Pid() int { return s.proc.Pid() }

// LogPath is the server's error log.
func (s *Server) LogPath() string { return s.log }

// IdleTimeout is wait_timeout.
func (s *Server) IdleTimeout() time.Duration { return s.cfg.IdleTimeout }

// Binary is the MariaDB it runs.
func (s *Server) Binary() Binary { return s.cfg.Binary }

// LinkName is the proxy between client and the server: "c1->my0".
func LinkName(client string) string { return client + "->" + Name }

// Endpoint returns the address of client's link to the server.
func (s *Server) Endpoint(client string) (string, error) {
	return s.Proxy(client, LinkName(client), s.addr)
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

// Pause freezes the server (SIGSTOP).
func (s *Server) Pause() error {
	unlock, err := s.Fault()
	if err != nil {
		return err
	}
	defer unlock()
	return s.proc.Pause()
}

// Resume continues it (SIGCONT).
func (s *Server) Resume() error {
	unlock, err := s.Fault()
	if err != nil {
		return err
	}
	defer unlock()
	return s.proc.Resume()
}

// Crash kills the server (SIGKILL): every session, and its locks, ends.
func (s *Server) Crash() error {
	unlock, err := s.Fault()
	if err != nil {
		return err
	}
	defer unlock()
	return s.proc.Kill()
}

// Running reports whether the server's process is alive.
func (s *Server) Running() bool { return s.proc.Running() }

// Restart starts the server again from its data (InnoDB recovers its
// tables and sequences); GET_LOCK locks, in memory only, are gone.
func (s *Server) Restart(ctx context.Context) error {
	unlock, err := s.Fault()
	if err != nil {
		return err
	}
	defer unlock()
	if err := s.proc.Kill(); err != nil {
		return err
	}
	if err := s.startProcess(); err != nil {
		return err
	}
	return s.waitReady(ctx)
}

// Close kills the server, closes the links and removes the data.
func (s *Server) Close() error { return s.Base.Close(nil, s.proc.Kill) }
