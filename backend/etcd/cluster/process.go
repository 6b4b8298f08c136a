package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/version"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdmain"

	"github.com/locktest/locktest/backend/serverkit"
	"github.com/locktest/locktest/internal/proc"
)

// Members as OS processes (Config.Processes): the etcd built into locktest,
// run by locktest re-executing itself through etcd's own entry point
// (etcdmain.Main), or any etcd 3.4 or later binary (Config.EtcdBin). A
// member pause is SIGSTOP of the whole process, a crash SIGKILL; a
// partition cuts peer connections at the relays in front of the members'
// peer listeners, which tell the member that dialled a connection by the
// process that owns its socket (relay.go).

// memberEnv, set to "1" in a process's environment, makes the process an
// etcd member: init below runs etcd instead of the program. Any binary that
// links this package can so serve as the built-in etcd, test binaries too.
const memberEnv = "LOCKTEST_ETCD_MEMBER"

func init() {
	sizeWAL()
	if os.Getenv(memberEnv) != "1" {
		return
	}
	etcdmain.Main(os.Args)
	os.Exit(0)
}

// Etcd is an etcd binary members can run as.
type Etcd struct {
	// Path is the binary; empty for the etcd built into locktest.
	Path    string
	Version string // "3.4.23"
}

// Describe names the binary and its version.
func (b Etcd) Describe() string {
	if b.Path == "" {
		return "etcd " + b.Version + " (built in)"
	}
	return "etcd " + b.Version + " (" + b.Path + ")"
}

// BuiltinEtcd is the etcd locktest is built with.
func BuiltinEtcd() Etcd { return Etcd{Version: version.Version} }

var versionLine = regexp.MustCompile(`(?m)^etcd Version: (\d+)\.(\d+)\.(\d+)\S*`)

// FindEtcd checks that path is an etcd binary members can run (3.4 or
// later) and reads its version. Its errors name what is wrong.
func FindEtcd(path string) (Etcd, error) {
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return Etcd{}, fmt.Errorf("--etcd-bin %s: %v", path, errors.Unwrap(err))
	case st.IsDir():
		return Etcd{}, fmt.Errorf("--etcd-bin %s: is a directory, not an etcd binary", path)
	case st.Mode()&0o111 == 0:
		return Etcd{}, fmt.Errorf("--etcd-bin %s: not executable", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return Etcd{}, fmt.Errorf("--etcd-bin %s: %v", path, err)
	}
	out, err := serverkit.Version(abs, "")
	if errors.Is(err, serverkit.ErrNoAnswer) {
		return Etcd{}, fmt.Errorf("--etcd-bin %s: %w", path, err)
	}
	m := versionLine.FindStringSubmatch(out)
	if m == nil {
		first, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
		if err != nil && first == "" {
			first = err.Error()
		}
		return Etcd{}, fmt.Errorf("--etcd-bin %s: not etcd (`%s --version` said %q)", path, path, first)
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	v := strings.TrimPrefix(m[0], "etcd Version: ")
	if major < 3 || major == 3 && minor < 4 {
		return Etcd{}, fmt.Errorf("--etcd-bin %s: etcd %s; locktest runs etcd 3.4 or later", path, v)
	}
	return Etcd{Path: abs, Version: v}, nil
}

// process is a member running as an OS process.
type process struct {
	proc   serverkit.Proc
	m      *Member
	client *clientv3.Client // direct, to this member only
	member uint64           // raft ID, known once ready
}

func (s *process) id() uint64 { return s.member }

func (s *process) stopped() <-chan struct{} { return s.proc.Process().Done() }

func (s *process) status(ctx context.Context) (*clientv3.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	return s.client.Status(ctx, s.m.ClientURL)
}

// ready waits until the member answers Status as a member that has joined
// (its header names it).
func (s *process) ready(ctx context.Context) error {
	w := s.wait(5*time.Millisecond, "to be ready")
	return w.Until(ctx, func(ctx context.Context) error {
		st, err := s.status(ctx)
		if err != nil {
			return err
		}
		if st.Header.MemberId == 0 {
			return errors.New("no member ID yet")
		}
		s.member = st.Header.MemberId
		return nil
	})
}

// wait waits for the member to do what, ending if its process exits (a
// port taken in the meantime: Start retries with other ports).
func (s *process) wait(every time.Duration, what string) serverkit.Wait {
	return serverkit.Wait{Every: every, What: "waiting for member " + s.m.Name + " " + what,
		Proc: &s.proc, Who: "member " + s.m.Name}
}

// servingPeers waits until the member answers on its peer listener. etcd
// binds its listeners first and serves them only after its bootstrap, in
// which a new member asks each peer for the cluster's members with a 1 s
// timeout: a peer that is bound but not yet serving costs that second, a
// peer not started yet is refused at once.
func (s *process) servingPeers(ctx context.Context) error {
	hc := &http.Client{Timeout: 200 * time.Millisecond}
	defer hc.CloseIdleConnections()
	w := s.wait(2*time.Millisecond, "to serve its peers")
	return w.Until(ctx, func(ctx context.Context) error {
		resp, err := hc.Get(s.m.peerListen + "/version")
		if err == nil {
			resp.Body.Close()
		}
		return err
	})
}

func (s *process) leader(ctx context.Context) uint64 {
	st, err := s.status(ctx)
	if err != nil {
		return 0
	}
	return st.Leader
}

func (s *process) indexes(ctx context.Context) (uint64, uint64, error) {
	st, err := s.status(ctx)
	if err != nil {
		return 0, 0, err
	}
	return st.RaftIndex, st.RaftAppliedIndex, nil
}

func (s *process) hardStop() {
	s.proc.Kill()
	s.client.Close()
}

func (s *process) pause() error  { return s.proc.Pause() }
func (s *process) resume() error { return s.proc.Resume() }

// cutPeer: a process's peers are cut at the relays (SetCuts), not by the
// process.
func (s *process) cutPeer(uint64, bool) {}

// startProcess starts member m as an OS process.
func (c *Cluster) startProcess(m *Member, initial, state string) (server, error) {
	path, env := c.cfg.EtcdBin, []string(nil)
	if path == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		path, env = self, []string{memberEnv + "=1"}
	}
	args := []string{
		"--name", m.Name,
		"--data-dir", m.dataDir,
		"--listen-client-urls", m.ClientURL,
		"--advertise-client-urls", m.ClientURL,
		"--listen-peer-urls", m.peerListen,
		"--initial-advertise-peer-urls", m.PeerURL,
		"--initial-cluster", initial,
		"--initial-cluster-token", c.token,
		"--initial-cluster-state", state,
		"--heartbeat-interval", strconv.Itoa(int(c.cfg.TickMs)),
		"--election-timeout", strconv.Itoa(int(c.cfg.ElectionMs)),
		"--snapshot-count", strconv.FormatUint(c.cfg.SnapshotCount, 10),
		"--quota-backend-bytes", strconv.FormatInt(c.cfg.QuotaBackendBytes, 10),
		"--auto-compaction-mode", "periodic",
		"--auto-compaction-retention", "0",
		"--logger", "zap",
		"--log-outputs", "stderr",
	}
	if f := c.cfg.TLS; f != nil {
		args = append(args, "--cert-file", f.CertFile, "--key-file", f.KeyFile,
			"--trusted-ca-file", f.TrustedCAFile, "--client-cert-auth")
	}
	log := ""
	if c.cfg.LogDir != "" {
		log = filepath.Join(c.cfg.LogDir, "etcd-"+m.Name+".log")
	}
	s := &process{m: m}
	if err := s.proc.Start(proc.Spec{Path: path, Args: args, Env: env, Log: log}); err != nil {
		return nil, err
	}
	cli, err := clientv3.New(c.clientConfig([]string{m.ClientURL}))
	if err != nil {
		s.proc.Kill()
		return nil, err
	}
	s.client = cli
	return s, nil
}

// peerOwner says which member's process dialled a peer connection that
// the relay in front of member to accepted: -1 when none does.
func (c *Cluster) peerOwner(conn net.Conn) int {
	pids := map[int]int{}
	var list []int
	for _, m := range c.members {
		if s, ok := m.server().(*process); ok && s.proc.Running() {
			pids[s.proc.Pid()] = m.Index
			list = append(list, s.proc.Pid())
		}
	}
	pid, err := proc.SocketOwner(conn.RemoteAddr().String(), conn.LocalAddr().String(), list)
	if err != nil {
		return -1
	}
	return pids[pid]
}
