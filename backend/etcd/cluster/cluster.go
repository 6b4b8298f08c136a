package cluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/locktest/locktest/backend/serverkit"
	"github.com/locktest/locktest/internal/ports"
)

// host is the only address anything binds to.
const host = ports.Host

// startAttempts is how often Start tries fresh ports after a bind failure.
const startAttempts = 5

// testHooks lets tests provoke failures during Start.
var testHooks struct {
	afterReserve func(attempt int, ports []int) // may occupy ports
	afterMembers func() error                   // error fails the attempt
}

// Member is one etcd member of a Cluster.
type Member struct {
	Index     int    // position in Cluster.Members()
	Name      string // "m0", "m1", ...
	ID        uint64 // raft member ID; AddMember gives the member a new one
	ClientURL string // direct (unproxied) client URL, "http://127.0.0.1:port" ("https://" with TLS)
	PeerURL   string // advertised peer URL, "http://127.0.0.1:port" (see relay)

	mu         sync.Mutex // guards srv, down, paused, removed and, once started, ID
	srv        server     // replaced by RestartMember and AddMember
	down       bool       // srv has been stopped (HardStopMember, RemoveMember, Close)
	paused     bool       // PauseMember in force
	removed    bool       // out of the cluster (RemoveMember) until AddMember
	dataDir    string
	log        *serverkit.LogWriter // embedded members only; a process writes its own
	relay      *relay
	peerListen string // URL the member's peer listener binds
}

// Etcd returns the member's embedded etcd, nil when the member is a
// process. Its Server field is the *etcdserver.EtcdServer (HardStop,
// Leader, MemberID, ReadyNotify, ...). After RestartMember it is the new
// instance.
func (m *Member) Etcd() *embed.Etcd {
	if s, ok := m.server().(*embedded); ok {
		return s.e
	}
	return nil
}

// Pid is the member's process ID, 0 when it is embedded.
func (m *Member) Pid() int {
	if s, ok := m.server().(*process); ok {
		return s.proc.Pid()
	}
	return 0
}

func (m *Member) server() server {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.srv
}

func (m *Member) setServer(s server) {
	m.mu.Lock()
	m.srv, m.down, m.paused = s, s == nil, false
	m.mu.Unlock()
}

// ClientAddr is the member's direct client address, "127.0.0.1:port".
func (m *Member) ClientAddr() string {
	_, addr, _ := strings.Cut(m.ClientURL, "://")
	return addr
}

// PeerAddr is the member's peer address, "127.0.0.1:port".
func (m *Member) PeerAddr() string { return strings.TrimPrefix(m.PeerURL, "http://") }

// running reports whether the member's server has not stopped.
func (m *Member) running() bool {
	m.mu.Lock()
	s, down := m.srv, m.down
	m.mu.Unlock()
	if s == nil || down {
		return false
	}
	select {
	case <-s.stopped():
		return false
	default:
		return true
	}
}

// Cluster is an etcd cluster, in this process or as OS processes, whose
// client links run through an in-process toxiproxy. All methods are safe
// for concurrent use.
type Cluster struct {
	// Its Dir holds the members' data dirs; its fault lock serialises the
	// fault methods (faults.go) with each other and with Close.
	serverkit.Base
	leases
	cfg     Config
	etcd    Etcd
	tls     *tls.Config // the clients', nil without Config.TLS
	token   string
	members []*Member

	initial string // the --initial-cluster string, for restarts

	cuts map[[2]int]bool // cut member pairs, i < j
	// peerCuts is a copy of cuts for the relays, which consult it for each
	// peer connection of a process member.
	peerCuts atomic.Pointer[map[[2]int]bool]

	mu    sync.Mutex
	admin *clientv3.Client // direct (unproxied) client, see AdminClient
}

// Start starts toxiproxy and a new etcd cluster and returns once every
// member is ready and all members agree on a leader. If ctx has no deadline
// cfg.StartTimeout applies. On error everything started so far has been
// released already.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	quietGlobals()

	c := &Cluster{cfg: cfg, etcd: BuiltinEtcd(), cuts: map[[2]int]bool{}, Base: serverkit.Base{Name: "cluster"}}
	c.leases = leases{admin: c.AdminClient}
	if c.tls, err = cfg.TLS.clientTLS(); err != nil {
		return nil, err
	}
	if cfg.EtcdBin != "" {
		if c.etcd, err = FindEtcd(cfg.EtcdBin); err != nil {
			return nil, err
		}
	}
	if err := serverkit.Start(ctx, cfg.StartTimeout, c.start, c.Close); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	var tok [6]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return err
	}
	c.token = "locktest-" + hex.EncodeToString(tok[:])

	if err := c.Open(c.cfg.Dir, "", "etcd"); err != nil {
		return err
	}
	var err error

	for i := range c.cfg.Members {
		name := MemberName(i)
		m := &Member{Index: i, Name: name, dataDir: filepath.Join(c.Dir, name), down: true}
		if !c.cfg.Processes {
			if m.log, err = serverkit.OpenLog(c.cfg.LogDir, "etcd-"+name+".log"); err != nil {
				return fmt.Errorf("cluster: %w", err)
			}
		}
		c.members = append(c.members, m)
	}

	if err := c.StartLinks(c.cfg.LogDir); err != nil {
		return err
	}
	c.peerCuts.Store(&map[[2]int]bool{})
	for _, m := range c.members {
		r, err := newRelay()
		if err != nil {
			return fmt.Errorf("cluster: peer relay: %w", err)
		}
		if c.cfg.Processes {
			r.filter(m.Index, c.peerOwner, c.peerCut)
		}
		m.relay = r
		m.PeerURL = "http://" + r.Addr()
	}

	err = serverkit.Retry(startAttempts, func(attempt int) error {
		err := c.startMembers(ctx, attempt)
		if err == nil && testHooks.afterMembers != nil {
			err = testHooks.afterMembers()
		}
		for _, m := range c.members {
			if err != nil {
				break
			}
			if err = m.server().ready(ctx); err != nil {
				err = fmt.Errorf("cluster: %w", err)
			}
		}
		return err
	}, func() error {
		c.stopMembers()
		for _, m := range c.members {
			if err := os.RemoveAll(m.dataDir); err != nil {
				return fmt.Errorf("cluster: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, m := range c.members {
		m.ID = m.server().id()
	}
	_, err = c.Leader(ctx)
	return err
}

// startServer starts member m, in this process or as a process.
func (c *Cluster) startServer(m *Member, initial, state string) (server, error) {
	var (
		s   server
		err error
	)
	if c.cfg.Processes {
		s, err = c.startProcess(m, initial, state)
	} else {
		s, err = c.startEmbedded(m, initial, state)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: starting member %s: %w", m.Name, err)
	}
	return s, nil
}

// startMembers starts every member, one after another, on fresh ports. A
// process member is waited for until it serves its peer listener, as
// embed.StartEtcd does for an embedded one.
// embed.StartEtcd returns once the member serves its peer and client
// listeners, before it is ready (a new cluster is ready only with a quorum),
// so starting sequentially costs little and lets each later member reach the
// earlier ones at once; started in parallel, a member's bootstrap check of
// its peers' member lists can hit a listener that is bound but not yet
// serving and wait out its 1 s timeout.
func (c *Cluster) startMembers(ctx context.Context, attempt int) error {
	n := len(c.members)
	ps, err := c.Reserve(2 * n)
	if err != nil {
		return err
	}
	if testHooks.afterReserve != nil {
		testHooks.afterReserve(attempt, ps)
	}

	scheme := "http://"
	if c.tls != nil {
		scheme = "https://"
	}
	initial := make([]string, n)
	defer func() { c.initial = strings.Join(initial, ",") }()
	for i, m := range c.members {
		m.ClientURL = scheme + net.JoinHostPort(host, strconv.Itoa(ps[2*i]))
		m.peerListen = "http://" + net.JoinHostPort(host, strconv.Itoa(ps[2*i+1]))
		m.relay.setTarget(strings.TrimPrefix(m.peerListen, "http://"))
		initial[i] = m.Name + "=" + m.PeerURL
	}
	for _, m := range c.members {
		s, err := c.startServer(m, strings.Join(initial, ","), embed.ClusterStateFlagNew)
		if err != nil {
			return err
		}
		m.setServer(s)
		if p, ok := s.(*process); ok {
			if err := p.servingPeers(ctx); err != nil {
				return fmt.Errorf("cluster: %w", err)
			}
		}
	}
	return nil
}

func (c *Cluster) memberConfig(m *Member, initialCluster, state string) (*embed.Config, error) {
	curl, err := url.Parse(m.ClientURL)
	if err != nil {
		return nil, err
	}
	purl, err := url.Parse(m.PeerURL)
	if err != nil {
		return nil, err
	}
	lpurl, err := url.Parse(m.peerListen)
	if err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Name = m.Name
	cfg.Dir = m.dataDir

	// Each member logs to its own file. Setting ZapLoggerBuilder keeps
	// embed from building a stderr logger; we never call
	// cfg.SetupGlobalLoggers, which would touch grpclog and zap's globals.
	cfg.Logger = "zap"
	cfg.LogLevel = "info"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zapLogger(m.log))

	cfg.ListenClientUrls = []url.URL{*curl}
	cfg.AdvertiseClientUrls = []url.URL{*curl}
	cfg.ListenPeerUrls = []url.URL{*lpurl}
	cfg.AdvertisePeerUrls = []url.URL{*purl}
	cfg.InitialCluster = initialCluster
	cfg.InitialClusterToken = c.token
	cfg.ClusterState = state

	cfg.TickMs = c.cfg.TickMs
	cfg.ElectionMs = c.cfg.ElectionMs
	cfg.SnapshotCount = c.cfg.SnapshotCount
	cfg.QuotaBackendBytes = c.cfg.QuotaBackendBytes
	cfg.UnsafeNoFsync = c.cfg.UnsafeNoFsync

	// Keep it light: no compaction, no pprof, no metrics listener
	// (metrics "basic" only feeds the global prometheus registry). The
	// JSON gateway stays on, as etcd has it by default: a lock client
	// without gRPC (a script, Python's standard library) speaks it.
	cfg.AutoCompactionMode = embed.CompactorModePeriodic // with retention 0: off
	cfg.AutoCompactionRetention = "0"
	cfg.EnableGRPCGateway = true
	cfg.EnablePprof = false
	cfg.Metrics = "basic"
	cfg.ListenMetricsUrls = nil
	return cfg, nil
}

// stopMembers hard-stops every started member, all at once.
//
// First all peer connections are cut at the relays (see relay for why).
// Then hardStop: for an embedded member, embed.Etcd.Close alone would call
// EtcdServer.Stop, which tries to hand leadership to a peer first and, with
// the peers going away too, waits for that (~5 s for three members); a
// process is killed.
func (c *Cluster) stopMembers() {
	for _, m := range c.members {
		if m.relay != nil {
			m.relay.setTarget("")
			m.relay.Cut()
		}
	}
	var wg sync.WaitGroup
	for _, m := range c.members {
		wg.Go(m.stop)
	}
	wg.Wait()
	c.ReleasePorts()
}

// Close stops everything Start started and removes the data directories:
// the clients made by Client, all toxiproxy proxies and its API listener,
// every etcd member and its listeners. It is idempotent and safe after a
// failed Start.
func (c *Cluster) Close() error {
	var errs []error
	return c.Base.Close(func() {
		// Dropping the proxies first cuts every proxied client connection,
		// so the members' gRPC servers have no streams left to drain.
		if c.Proxies != nil {
			errs = append(errs, c.Proxies.Close())
		}
		for _, m := range c.members {
			if m.relay != nil {
				m.relay.Close()
			}
		}
	}, func() error {
		c.stopMembers()
		for _, m := range c.members {
			m.log.Sync()
			errs = append(errs, m.log.Close())
		}
		return errors.Join(errs...)
	})
}

// Members returns the members in order (m0, m1, ...).
func (c *Cluster) Members() []*Member {
	return append([]*Member(nil), c.members...)
}

// Leader returns the index of the running member that every running member
// names as leader, waiting until they agree. It fails when ctx ends first,
// reporting what the members last said.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	return awaitLeader(ctx, c.pollEvery(), func(ctx context.Context) (int, error) {
		m, err := c.leaderNow(ctx)
		if err != nil {
			return -1, err
		}
		return m.Index, nil
	})
}

// awaitLeader asks now every so often which member leads until it says,
// the cluster is closed, or ctx ends (the error then says what the
// members last said).
func awaitLeader(ctx context.Context, every time.Duration, now func(context.Context) (int, error)) (int, error) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		i, err := now(ctx)
		if err == nil || errors.Is(err, serverkit.ErrClosed) {
			return i, err
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("%w: %w", err, ctx.Err())
		case <-t.C:
		}
	}
}

// leaderNow asks every running member whom it names as leader. A process
// member that is paused cannot answer and is left out.
func (c *Cluster) leaderNow(ctx context.Context) (*Member, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	var (
		lead  uint64
		views []string
		agree = true
	)
	for _, m := range c.members {
		if !m.running() || c.cfg.Processes && m.isPaused() {
			continue
		}
		l := m.server().leader(ctx)
		views = append(views, fmt.Sprintf("%s:%x", m.Name, l))
		if l == 0 || (lead != 0 && l != lead) {
			agree = false
		}
		if lead == 0 {
			lead = l
		}
	}
	if len(views) == 0 {
		return nil, errors.New("cluster: no running members")
	}
	if !agree || lead == 0 {
		return nil, fmt.Errorf("cluster: members do not agree on a leader (%s)", strings.Join(views, " "))
	}
	for _, m := range c.members {
		if m.id() == lead {
			if !m.running() {
				return nil, fmt.Errorf("cluster: members still name %s, which is down, as leader", m.Name)
			}
			return m, nil
		}
	}
	return nil, fmt.Errorf("cluster: leader %x is not a member", lead)
}
