package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
)

// host is the only address anything binds to.
const host = "127.0.0.1"

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
	ClientURL string // direct (unproxied) client URL, "http://127.0.0.1:port"
	PeerURL   string // advertised peer URL, "http://127.0.0.1:port" (see relay)

	mu         sync.Mutex  // guards etcd, paused, closed, removed and, once started, ID
	etcd       *embed.Etcd // replaced by RestartMember and AddMember
	paused     bool        // PauseMember in force
	closed     bool        // etcd has been closed (HardStopMember, RemoveMember, Close)
	removed    bool        // out of the cluster (RemoveMember) until AddMember
	dataDir    string
	log        *logFile
	relay      *relay
	peerListen string // URL the member's peer listener binds
}

// Etcd returns the member's embedded etcd. Its Server field is the
// *etcdserver.EtcdServer (HardStop, Leader, MemberID, ReadyNotify, ...).
// After RestartMember it is the new instance.
func (m *Member) Etcd() *embed.Etcd {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.etcd
}

func (m *Member) setEtcd(e *embed.Etcd) {
	m.mu.Lock()
	m.etcd, m.closed = e, false
	m.mu.Unlock()
}

// ClientAddr is the member's direct client address, "127.0.0.1:port".
func (m *Member) ClientAddr() string { return strings.TrimPrefix(m.ClientURL, "http://") }

// PeerAddr is the member's peer address, "127.0.0.1:port".
func (m *Member) PeerAddr() string { return strings.TrimPrefix(m.PeerURL, "http://") }

// running reports whether the member's server has not stopped.
func (m *Member) running() bool {
	e := m.Etcd()
	if e == nil {
		return false
	}
	select {
	case <-e.Server.StopNotify():
		return false
	default:
		return true
	}
}

// Cluster is an in-process etcd cluster whose client links run through an
// in-process toxiproxy. All methods are safe for concurrent use.
type Cluster struct {
	cfg     Config
	token   string
	runDir  string // temporary; holds the members' data dirs
	members []*Member
	ports   []int

	tpServer *toxiproxy.ApiServer
	tpHTTP   *http.Server
	tpAddr   string
	tpClient *toxiclient.Client
	tpLog    *logFile

	initial string // the --initial-cluster string, for restarts

	// faultMu serialises the fault methods (faults.go) with each other and
	// with Close.
	faultMu sync.Mutex
	cuts    map[[2]int]bool // cut member pairs, i < j

	mu      sync.Mutex
	closed  bool
	proxies map[string]proxyInfo // by proxy name, as created by us
	clients []*clientv3.Client
	admin   *clientv3.Client // direct (unproxied) client, see AdminClient

	closeOnce sync.Once
	closeErr  error
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
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.StartTimeout)
		defer cancel()
	}
	quietGlobals()

	c := &Cluster{cfg: cfg, proxies: map[string]proxyInfo{}, cuts: map[[2]int]bool{}}
	if err := c.start(ctx); err != nil {
		c.Close()
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

	base := c.cfg.Dir
	if base != "" {
		if err := os.MkdirAll(base, 0o755); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
	}
	dir, err := os.MkdirTemp(base, "locktest-etcd-")
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	c.runDir = dir

	for i := range c.cfg.Members {
		name := "m" + strconv.Itoa(i)
		lf, err := openLog(c.cfg.LogDir, "etcd-"+name+".log")
		if err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
		c.members = append(c.members, &Member{Index: i, Name: name, log: lf, dataDir: filepath.Join(dir, name)})
	}

	if err := c.startToxiproxy(); err != nil {
		return err
	}
	for _, m := range c.members {
		r, err := newRelay()
		if err != nil {
			return fmt.Errorf("cluster: peer relay: %w", err)
		}
		m.relay = r
		m.PeerURL = "http://" + r.addr()
	}

	for attempt := 1; ; attempt++ {
		err := c.startMembers(attempt)
		if err == nil && testHooks.afterMembers != nil {
			err = testHooks.afterMembers()
		}
		if err == nil {
			break
		}
		c.stopMembers()
		for _, m := range c.members {
			m.setEtcd(nil)
		}
		if !isAddrInUse(err) || attempt == startAttempts {
			return err
		}
		for _, m := range c.members {
			if err := os.RemoveAll(m.dataDir); err != nil {
				return fmt.Errorf("cluster: %w", err)
			}
		}
	}

	for _, m := range c.members {
		e := m.Etcd()
		select {
		case <-e.Server.ReadyNotify():
		case err := <-e.Err():
			return fmt.Errorf("cluster: member %s failed: %v", m.Name, err)
		case <-e.Server.StopNotify():
			return fmt.Errorf("cluster: member %s stopped during start", m.Name)
		case <-ctx.Done():
			return fmt.Errorf("cluster: waiting for member %s to be ready: %w", m.Name, ctx.Err())
		}
	}
	_, err = c.Leader(ctx)
	return err
}

// startMembers starts every member, one after another, on fresh ports.
// embed.StartEtcd returns once the member serves its peer and client
// listeners, before it is ready (a new cluster is ready only with a quorum),
// so starting sequentially costs little and lets each later member reach the
// earlier ones at once; started in parallel, a member's bootstrap check of
// its peers' member lists can hit a listener that is bound but not yet
// serving and wait out its 1 s timeout.
func (c *Cluster) startMembers(attempt int) error {
	n := len(c.members)
	ports, err := reservePorts(2 * n)
	if err != nil {
		return err
	}
	c.ports = append(c.ports, ports...)
	if testHooks.afterReserve != nil {
		testHooks.afterReserve(attempt, ports)
	}

	initial := make([]string, n)
	defer func() { c.initial = strings.Join(initial, ",") }()
	for i, m := range c.members {
		m.ClientURL = "http://" + net.JoinHostPort(host, strconv.Itoa(ports[2*i]))
		m.peerListen = "http://" + net.JoinHostPort(host, strconv.Itoa(ports[2*i+1]))
		m.relay.setTarget(strings.TrimPrefix(m.peerListen, "http://"))
		initial[i] = m.Name + "=" + m.PeerURL
	}
	for _, m := range c.members {
		ecfg, err := c.memberConfig(m, strings.Join(initial, ","))
		if err != nil {
			return err
		}
		e, err := embed.StartEtcd(ecfg)
		if err != nil {
			return fmt.Errorf("cluster: starting member %s: %w", m.Name, err)
		}
		m.setEtcd(e)
		m.ID = uint64(e.Server.MemberID())
	}
	return nil
}

func (c *Cluster) memberConfig(m *Member, initialCluster string) (*embed.Config, error) {
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
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(m.log.zap())

	cfg.ListenClientUrls = []url.URL{*curl}
	cfg.AdvertiseClientUrls = []url.URL{*curl}
	cfg.ListenPeerUrls = []url.URL{*lpurl}
	cfg.AdvertisePeerUrls = []url.URL{*purl}
	cfg.InitialCluster = initialCluster
	cfg.InitialClusterToken = c.token
	cfg.ClusterState = embed.ClusterStateFlagNew

	cfg.TickMs = c.cfg.TickMs
	cfg.ElectionMs = c.cfg.ElectionMs
	cfg.SnapshotCount = c.cfg.SnapshotCount
	cfg.QuotaBackendBytes = c.cfg.QuotaBackendBytes
	cfg.UnsafeNoFsync = c.cfg.UnsafeNoFsync

	// Keep it light: no compaction, no gateway, no pprof, no metrics
	// listener (metrics "basic" only feeds the global prometheus registry).
	cfg.AutoCompactionMode = embed.CompactorModePeriodic // with retention 0: off
	cfg.AutoCompactionRetention = "0"
	cfg.EnableGRPCGateway = false
	cfg.EnablePprof = false
	cfg.Metrics = "basic"
	cfg.ListenMetricsUrls = nil
	return cfg, nil
}

// stopMembers hard-stops and closes every started member.
//
// First all peer connections are cut at the relays (see relay for why).
// Then HardStop: embed.Etcd.Close calls EtcdServer.Stop, which tries to hand
// leadership to a peer first and, with the peers going away too, waits for
// that (~5 s for three members). After HardStop on every member there is no
// leader to hand off and no peer traffic, and Close only tears down the
// listeners and handlers.
func (c *Cluster) stopMembers() {
	for _, m := range c.members {
		if m.relay != nil {
			m.relay.setTarget("")
			m.relay.cut()
		}
	}
	var wg sync.WaitGroup
	for _, m := range c.members {
		if e := m.Etcd(); e != nil {
			wg.Go(e.Server.HardStop)
		}
	}
	wg.Wait()
	for _, m := range c.members {
		if e := m.Etcd(); e != nil {
			wg.Go(m.closeEtcd)
		}
	}
	wg.Wait()
	releasePorts(c.ports)
	c.ports = nil
}

// Close stops everything Start started and removes the data directories:
// the clients made by Client, all toxiproxy proxies and its API listener,
// every etcd member and its listeners. It is idempotent and safe after a
// failed Start.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.close() })
	return c.closeErr
}

func (c *Cluster) close() error {
	c.mu.Lock()
	c.closed = true
	clients := c.clients
	c.clients = nil
	c.mu.Unlock()

	var errs []error
	for _, cl := range clients {
		cl.Close() // error is only ever "already closed"
	}
	// Dropping the proxies first cuts every proxied client connection, so
	// the members' gRPC servers have no streams left to drain.
	if c.tpServer != nil {
		if err := c.tpServer.Collection.Clear(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.tpHTTP != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := c.tpHTTP.Shutdown(ctx); err != nil {
			c.tpHTTP.Close()
		}
		cancel()
	}
	for _, m := range c.members {
		if m.relay != nil {
			m.relay.close()
		}
	}
	// Wait for a RestartMember in progress; it sees c.closed afterwards.
	c.faultMu.Lock()
	c.stopMembers()
	c.faultMu.Unlock()
	for _, m := range c.members {
		if m.log != nil {
			m.log.f.Sync()
		}
		if err := m.log.close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.tpLog.close(); err != nil {
		errs = append(errs, err)
	}
	if c.runDir != "" {
		if err := os.RemoveAll(c.runDir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Members returns the members in order (m0, m1, ...).
func (c *Cluster) Members() []*Member {
	return append([]*Member(nil), c.members...)
}

// DataDir returns the temporary directory holding the members' data
// directories; Close removes it.
func (c *Cluster) DataDir() string { return c.runDir }

// Leader returns the index of the running member that every running member
// names as leader, waiting until they agree. It fails when ctx ends first,
// reporting what the members last said.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for {
		m, err := c.leaderNow()
		if err == nil {
			return m.Index, nil
		}
		if errors.Is(err, ErrClosed) {
			return -1, err
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("%w: %w", err, ctx.Err())
		case <-t.C:
		}
	}
}

// WaitLeader waits until all running members agree on a leader.
func (c *Cluster) WaitLeader(ctx context.Context) error {
	_, err := c.Leader(ctx)
	return err
}

func (c *Cluster) leaderNow() (*Member, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	var (
		lead  uint64
		views []string
		agree = true
	)
	for _, m := range c.members {
		if !m.running() {
			continue
		}
		l := uint64(m.Etcd().Server.Leader())
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
