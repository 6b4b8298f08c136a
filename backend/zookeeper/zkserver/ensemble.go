// Package zkserver runs a ZooKeeper ensemble for a run: real
// QuorumPeerMain processes (Debian's zookeeper package) on loopback, each
// with its data in a scratch directory under the run and its log in the
// run's logs (LogDir/zkN.log), none outliving locktest (internal/proc). Every
// client's link to every server is a toxiproxy proxy of its own (links.go),
// and every server's quorum and election ports are behind relays, so that
// a cut between two servers cuts their real peer traffic (relay.go). The
// faults' levers are here too (faults.go): SIGSTOP and SIGCONT, SIGKILL and
// a restart from the data, cuts between servers, the leader.
//
// Servers are named zk1, zk2, ... after their ZooKeeper server id (myid),
// and addressed by index from 0 in that order.
package zkserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/locktest/locktest/backend/serverkit"
	"github.com/locktest/locktest/internal/ports"
	"github.com/locktest/locktest/internal/proc"
)

// Config describes an ensemble.
type Config struct {
	// Servers is the ensemble's size: 3 or 5 (1 runs one standalone
	// server, for tests).
	Servers int
	// Dir is where the servers' scratch directory goes (the run
	// directory); "" is os.TempDir. Close removes it.
	Dir string
	// LogDir receives each server's log, zkN.log, and toxiproxy.log; ""
	// keeps them in the scratch directory.
	LogDir string
	// TickTime is ZooKeeper's tick (default DefaultTick): sessions last 2
	// to MaxSessionTimeout, a follower may lag 5 ticks.
	TickTime time.Duration
	// Install is the ZooKeeper the servers run (default Find(nil)).
	Install Install
	// StartTimeout bounds Start when ctx has no deadline (default 90 s:
	// a server's start is CPU-bound, 2-17 s measured on a loaded 2-core
	// machine).
	StartTimeout time.Duration

	// archiveAtExit, when set, is where the servers write the archive of
	// their classes as they exit (cds.go).
	archiveAtExit string
}

// DefaultTick is the default tickTime: with syncLimit 5, a server starved
// of CPU for a second is not yet declared dead (a loaded CI machine).
const DefaultTick = 200 * time.Millisecond

// MaxSessionTimeout is the longest session a client gets as asked;
// ZooKeeper's default caps sessions at 20 ticks (4 s), below the TTLs a
// run may ask for.
const MaxSessionTimeout = 60 * time.Second

// startAttempts is how often Start tries fresh ports when a port was taken
// before a server bound it.
const startAttempts = 3

// Server is one ZooKeeper server of an ensemble.
type Server struct {
	Index int    // from 0, in MemberNames order
	ID    int    // ZooKeeper's server id (myid): Index+1
	Name  string // "zk1"
	// ClientAddr is the address its clients reach it at, directly;
	// workload clients go through their own proxies (Endpoints).
	ClientAddr string
	// DataDir holds its snapshots and, under version-2, its transaction
	// logs.
	DataDir string

	dir, log         string
	quorum, election string // its real peer addresses
	relays           []*relay
	proc             serverkit.Proc
}

// TxnLogDir is where the server writes its transaction logs.
func (s *Server) TxnLogDir() string { return filepath.Join(s.DataDir, "version-2") }

// Pid is the ID of the server's process, 0 while it is down.
func (s *Server) Pid() int {
	if s.proc.Running() {
		return s.proc.Pid()
	}
	return 0
}

// Ensemble is a started set of servers. Its methods are safe for
// concurrent use.
type Ensemble struct {
	serverkit.Base // its Dir holds the servers' data and configurations
	cfg            Config
	servers        []*Server
	version        string
	jvm            []string // class-data sharing's flags (cds.go)

	mu   sync.Mutex
	cuts map[[2]int]CutMode // by sid pair, low first
}

// Start starts toxiproxy and the servers, and returns once they serve
// clients with one leader. If ctx has no deadline, cfg.StartTimeout
// applies. On error everything started has been stopped.
func Start(ctx context.Context, cfg Config) (*Ensemble, error) {
	if cfg.Servers < 1 {
		return nil, fmt.Errorf("zkserver: %d servers", cfg.Servers)
	}
	if cfg.TickTime == 0 {
		cfg.TickTime = DefaultTick
	}
	if cfg.TickTime < time.Millisecond || cfg.TickTime%time.Millisecond != 0 {
		return nil, fmt.Errorf("zkserver: tick %v is not a whole number of milliseconds", cfg.TickTime)
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 90 * time.Second
	}
	if cfg.Install.Java == "" {
		in, err := Find(nil)
		if err != nil {
			return nil, err
		}
		cfg.Install = in
	}
	e := &Ensemble{cfg: cfg, cuts: map[[2]int]CutMode{}, Base: serverkit.Base{Name: "zkserver"}}
	if cfg.archiveAtExit != "" {
		e.jvm = []string{"-XX:ArchiveClassesAtExit=" + cfg.archiveAtExit}
	} else {
		e.jvm = cfg.Install.archiveFlags(ctx, cfg.Dir)
	}
	if err := serverkit.Start(ctx, cfg.StartTimeout, e.start, e.Close); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *Ensemble) start(ctx context.Context) error {
	if err := e.Open(e.cfg.Dir, e.cfg.LogDir, "zk"); err != nil {
		return err
	}
	for i := range e.cfg.Servers {
		s := &Server{Index: i, ID: i + 1, Name: ServerName(i)}
		s.dir = filepath.Join(e.Dir, s.Name)
		s.DataDir = filepath.Join(s.dir, "data")
		s.log = filepath.Join(e.LogDir, s.Name+".log")
		e.servers = append(e.servers, s)
	}
	if err := e.StartLinks(e.LogDir); err != nil {
		return err
	}
	return serverkit.Retry(startAttempts, func(int) error { return e.startAttempt(ctx) }, e.stop)
}

// startAttempt starts every server on fresh ports, with empty data, and
// waits until the ensemble serves.
func (e *Ensemble) startAttempt(ctx context.Context) error {
	ps, err := e.Reserve(3 * len(e.servers))
	if err != nil {
		return err
	}
	for i, s := range e.servers {
		s.ClientAddr = addr(ps[3*i])
		s.quorum, s.election = addr(ps[3*i+1]), addr(ps[3*i+2])
		if len(e.servers) > 1 {
			for _, k := range []portKind{quorumPort, electionPort} {
				target := s.quorum
				if k == electionPort {
					target = s.election
				}
				r, err := newRelay(k, s.ID, target, e.cutMode)
				if err != nil {
					return fmt.Errorf("zkserver: a relay for %s: %w", s.Name, err)
				}
				s.relays = append(s.relays, r)
			}
		}
	}
	for _, s := range e.servers {
		if err := e.writeConfig(s); err != nil {
			return err
		}
	}
	for _, s := range e.servers {
		if err := e.startProcess(s); err != nil {
			return err
		}
	}
	return e.waitReady(ctx)
}

func addr(port int) string { return ports.Host + ":" + strconv.Itoa(port) }

// writeConfig writes s's zoo.cfg and myid, over an empty data directory.
// Each server's own line holds the addresses it binds; the other lines the
// addresses it dials: their relays'. Configurations that differ by server
// are fine with reconfigEnabled=false (the default): a server then never
// takes another's view of the ensemble (QuorumPeer.processReconfig returns
// at once).
func (e *Ensemble) writeConfig(s *Server) error {
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("zkserver: %w", err)
	}
	if err := os.MkdirAll(s.DataDir, 0o755); err != nil {
		return fmt.Errorf("zkserver: %w", err)
	}
	if err := os.WriteFile(filepath.Join(s.DataDir, "myid"), []byte(strconv.Itoa(s.ID)+"\n"), 0o644); err != nil {
		return fmt.Errorf("zkserver: %w", err)
	}
	_, port, _ := strings.Cut(s.ClientAddr, ":")
	var b strings.Builder
	fmt.Fprintf(&b, "tickTime=%d\ninitLimit=10\nsyncLimit=5\n", e.cfg.TickTime.Milliseconds())
	fmt.Fprintf(&b, "maxSessionTimeout=%d\n", MaxSessionTimeout.Milliseconds())
	fmt.Fprintf(&b, "dataDir=%s\nclientPortAddress=%s\nclientPort=%s\n", s.DataDir, ports.Host, port)
	b.WriteString("maxClientCnxns=0\n") // 60 per address by default, and every proxied client is 127.0.0.1
	b.WriteString("admin.enableServer=false\n")
	b.WriteString("4lw.commands.whitelist=srvr,stat,mntr,ruok,cons,dump,wchp\n")
	// A SIGKILLed server loses nothing the kernel has; a machine crash is
	// not among the faults.
	b.WriteString("forceSync=no\n")
	b.WriteString("autopurge.purgeInterval=0\n")
	if len(e.servers) > 1 {
		for _, o := range e.servers {
			q, el := o.quorum, o.election
			if o != s {
				q, el = o.relays[0].Addr(), o.relays[1].Addr()
			}
			_, elPort, _ := strings.Cut(el, ":")
			fmt.Fprintf(&b, "server.%d=%s:%s\n", o.ID, q, elPort)
		}
	}
	if err := os.WriteFile(filepath.Join(s.dir, "zoo.cfg"), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("zkserver: %w", err)
	}
	return nil
}

func (e *Ensemble) startProcess(s *Server) error {
	if err := s.proc.Start(proc.Spec{Path: e.cfg.Install.Java, Args: e.cfg.Install.args(filepath.Join(s.dir, "zoo.cfg"), e.jvm), Dir: s.dir, Log: s.log}); err != nil {
		return fmt.Errorf("zkserver: %s: %w", s.Name, err)
	}
	return nil
}

// listening says whether s, as its log says since it started, listens on
// its election port, or could not bind it (syscall.EADDRINUSE: another
// process took it). ZooKeeper serves clients before it binds that port, and a
// server that cannot bind it exits a second later (status 14), having
// served meanwhile; or serves on, unreachable by the others' elections,
// while someone else's process answers its relays.
func (e *Ensemble) listening(s *Server) (bool, error) {
	if len(e.servers) == 1 {
		return true, nil // standalone: no election port
	}
	b, err := s.proc.LogSince()
	if err != nil {
		return false, fmt.Errorf("zkserver: %w", err)
	}
	log := string(b)
	switch {
	case strings.Contains(log, "Address already in use"):
		return false, fmt.Errorf("zkserver: %s: %w", s.Name, syscall.EADDRINUSE)
	case strings.Contains(log, "is accepting connections now"):
		return true, nil
	}
	return false, nil
}

// waitReady waits until every server serves clients, one of them as the
// leader.
func (e *Ensemble) waitReady(ctx context.Context) error {
	w := serverkit.Wait{Every: 25 * time.Millisecond, // each srvr costs a log line
		What: "zkserver: waiting for the ensemble to serve (logs: " + filepath.Dir(e.servers[0].log) + ")"}
	return w.Until(ctx, func(ctx context.Context) error {
		leaders, serving := 0, 0
		var version string
		for _, s := range e.servers {
			if !s.proc.Running() {
				return serverkit.Final(exitedEarly(s))
			}
			if ok, err := e.listening(s); err != nil || !ok {
				if err != nil {
					return serverkit.Final(err)
				}
				continue
			}
			st, err := Srvr(ctx, s.ClientAddr)
			if err != nil || st.Mode == "" {
				continue
			}
			serving++
			version = st.Version
			if st.Mode == ModeLeader || st.Mode == ModeStandalone {
				leaders++
			}
		}
		if leaders != 1 || serving != len(e.servers) {
			return fmt.Errorf("%d of %d serving, %d leaders", serving, len(e.servers), leaders)
		}
		e.version = version
		return nil
	})
}

// exitedEarly says why s's process ended as it started.
func exitedEarly(s *Server) error {
	// Exit status 14: UNABLE_TO_BIND_QUORUM_PORT (the election port).
	if strings.Contains(fmt.Sprint(s.proc.Process().Err()), "exit status 14") {
		return fmt.Errorf("zkserver: %s: %w", s.Name, syscall.EADDRINUSE)
	}
	return s.proc.Exited("zkserver: " + s.Name)
}

// stop kills every server and closes the relays, for a retry or Close.
func (e *Ensemble) stop() error {
	var wg sync.WaitGroup
	for _, s := range e.servers {
		wg.Go(func() { s.proc.Kill() })
	}
	wg.Wait()
	for _, s := range e.servers {
		for _, r := range s.relays {
			r.Close()
		}
		s.relays = nil
	}
	e.ReleasePorts()
	return nil
}

// Close stops everything Start started (SIGKILL: ZooKeeper recovers from
// its transaction log after any crash, and nothing is gained by waiting),
// and removes the scratch directory. Idempotent.
func (e *Ensemble) Close() error { return e.Base.Close(nil, e.stop) }

// ServerName names server i (from 0): zk1, zk2, ..., by its myid.
func ServerName(i int) string { return "zk" + strconv.Itoa(i+1) }

// Servers returns the servers in order (zk1, zk2, ...).
func (e *Ensemble) Servers() []*Server { return append([]*Server(nil), e.servers...) }

// Version is the servers' ZooKeeper version ("3.8.0").
func (e *Ensemble) Version() string { return e.version }

// Tick is the servers' tickTime.
func (e *Ensemble) Tick() time.Duration { return e.cfg.TickTime }

// Install is the ZooKeeper the servers run.
func (e *Ensemble) Install() Install { return e.cfg.Install }

// ClientAddrs are the servers' own client addresses, in order: a
// connection past every client's proxies, for the observer.
func (e *Ensemble) ClientAddrs() []string {
	out := make([]string, len(e.servers))
	for i, s := range e.servers {
		out[i] = s.ClientAddr
	}
	return out
}
