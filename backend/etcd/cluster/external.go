package cluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locktest/locktest/backend/serverkit"
	"github.com/locktest/locktest/internal/links"
	"github.com/locktest/locktest/system"
)

// ExternalConfig describes a running etcd cluster that locktest tests but
// did not start.
type ExternalConfig struct {
	// Endpoints are the client URLs of its members, one per member
	// ("https://10.0.0.1:2379").
	Endpoints []string
	// Toxiproxy is the API URL of a running toxiproxy-server for the
	// member links ("http://10.0.0.9:8474"); "" runs one in this process.
	Toxiproxy string
	// CACert, Cert and Key are PEM files for https endpoints: the CA the
	// members' certificates are checked against (empty: the system's), and
	// the client certificate and key (empty: none, for server-side TLS).
	CACert, Cert, Key string
	// Prefix is where every key locktest writes lives ("/locktest/<run>/");
	// Close deletes what is under it. It must end in "/", so that it
	// covers whole path segments.
	Prefix string
	// LogDir receives external.log (what Connect found, what Close
	// deleted) and the in-process toxiproxy's toxiproxy.log; "" discards.
	LogDir string
}

// The timeouts of Connect's and Close's requests to the members.
const (
	statusTimeout = 3 * time.Second
	cleanTimeout  = 10 * time.Second
)

// External is an etcd cluster that locktest tests but did not start. It
// reaches the members only through their client URLs, so it offers what
// that allows (a leader, client links behind toxiproxy, lease actions,
// hashes) and none of the member faults (partitions, member pauses and
// crashes), which need the members in locktest's hands. Every key locktest
// writes lives under the configured prefix, and External itself touches
// no key outside it. All methods are safe for concurrent use.
type External struct {
	// Its Proxies are the toxiproxy in this process: the resource's links
	// always, the member links too unless they are on a toxiproxy-server
	// (links). It has no directory, ports or faults of its own.
	serverkit.Base
	leases
	cfg     ExternalConfig
	version string
	members []*externalMember
	direct  *tls.Config // for the members' own URLs; nil without TLS
	proxied *tls.Config // for their proxies (verifyAnyHost); nil without TLS
	// token makes our proxy names unique on a toxiproxy-server that other
	// runs share.
	token  string
	links  *links.Links // the member links: Proxies, or a toxiproxy-server's
	log    *serverkit.LogWriter
	logger *log.Logger // to log, set once it is open

	// admin is a direct client to every member; owned says that Connect
	// finished, and that Close may delete under the prefix. Both are set
	// by Connect only.
	admin *clientv3.Client
	owned bool

	// stopOwner stops renewing the prefix's alive mark; leftovers says
	// what Connect removed that killed runs had left (external_owner.go).
	stopOwner context.CancelFunc
	leftovers string
}

// externalMember is a member of an External.
type externalMember struct {
	name  string
	id    uint64
	url   string               // client URL, as given
	addr  string               // its host:port
	cli   *clientv3.Client     // direct, to this member only
	maint pb.MaintenanceClient // over cli's connection, kept open for Leader's polling
}

var (
	_ system.System   = (*External)(nil)
	_ system.Leaderer = (*External)(nil)
	_ system.Linker   = (*External)(nil)
	_ system.Leaser   = (*External)(nil)
	_ system.Hasher   = (*External)(nil)
	_ system.Hinter   = (*External)(nil)
)

// Connect checks that cfg describes a running etcd cluster locktest can
// test, one endpoint per member, and sets up the links to it. It touches
// no key outside cfg.Prefix, and refuses a prefix that holds keys already:
// Close deletes everything under it. Its errors are one line naming what
// is wrong; on error nothing is left running or connected.
func Connect(ctx context.Context, cfg ExternalConfig) (*External, error) {
	if err := checkPrefix(cfg.Prefix); err != nil {
		return nil, err
	}
	urls, err := parseEndpoints(cfg.Endpoints)
	if err != nil {
		return nil, err
	}
	e := &External{cfg: cfg, Base: serverkit.Base{Name: "cluster"}}
	e.leases = leases{admin: e.adminClient}
	if urls[0].Scheme == "https" {
		if e.direct, e.proxied, err = loadTLS(cfg, urls); err != nil {
			return nil, err
		}
	} else if cfg.CACert != "" || cfg.Cert != "" || cfg.Key != "" {
		return nil, fmt.Errorf("--cacert, --cert and --key are for https endpoints, and %s is http", urls[0])
	}
	var tok [3]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, err
	}
	e.token = "locktest-" + hex.EncodeToString(tok[:]) + "-"
	if err := e.connect(ctx, urls); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

func (e *External) connect(ctx context.Context, urls []*url.URL) error {
	var err error
	if e.log, err = serverkit.OpenLog(e.cfg.LogDir, "external.log"); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	e.logger = stdLogger(e.log, "")
	for _, u := range urls {
		cli, err := clientv3.New(clientConfigTLS([]string{u.String()}, e.direct))
		if err != nil {
			return fmt.Errorf("--endpoints %s: %v", u, err)
		}
		e.members = append(e.members, &externalMember{url: u.String(), addr: u.Host, cli: cli,
			maint: pb.NewMaintenanceClient(cli.ActiveConnection())})
	}
	if err := e.identify(ctx); err != nil {
		return err
	}
	eps := make([]string, len(urls))
	for i, u := range urls {
		eps[i] = u.String()
	}
	if e.admin, err = clientv3.New(clientConfigTLS(eps, e.direct)); err != nil {
		return err
	}
	admin := e.admin
	cctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	used, err := admin.Get(cctx, e.cfg.Prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("cluster: reading prefix %s: %v", e.cfg.Prefix, err)
	}
	if used.Count > 0 {
		return fmt.Errorf("cluster: prefix %s already holds %d keys; Close deletes what is under it, so give one nothing uses", e.cfg.Prefix, used.Count)
	}

	// The resource listens inside locktest, on loopback, where a remote
	// toxiproxy cannot reach it: its links are always in this process.
	if err := e.StartLinks(e.cfg.LogDir); err != nil {
		return err
	}
	e.links = e.Proxies
	if e.cfg.Toxiproxy != "" {
		if e.links, err = links.Connect(e.cfg.Toxiproxy); err != nil {
			return err
		}
	}
	sctx, cancelSweep := context.WithTimeout(ctx, cleanTimeout)
	defer cancelSweep()
	if e.leftovers, err = e.sweepDead(sctx, admin); err != nil {
		return err
	}
	if e.leftovers != "" {
		e.logger.Print(e.leftovers)
	}
	if err := e.markOwner(sctx, admin); err != nil {
		return err
	}
	// Only now may Close delete under the prefix: a failed Connect leaves
	// the keys there, whoever wrote them.
	e.owned = true
	e.logger.Printf("connected to %s; member links on toxiproxy %s, prefix %s", e.Describe(), e.links.Addr(), e.cfg.Prefix)
	return nil
}

// identify asks every endpoint for its status, and the cluster for its
// members: each endpoint must be a different member, and every member
// must have one.
func (e *External) identify(ctx context.Context) error {
	sts := make([]*pb.StatusResponse, len(e.members))
	errs := make([]error, len(e.members))
	var wg sync.WaitGroup
	for i, m := range e.members {
		wg.Go(func() { sts[i], errs[i] = e.firstStatus(ctx, m) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	lctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	list, err := e.members[0].cli.MemberList(lctx)
	if err != nil {
		return fmt.Errorf("--endpoints %s: listing the members: %v", e.members[0].url, err)
	}
	byID := map[uint64]*pb.Member{}
	for _, pm := range list.Members {
		byID[pm.ID] = pm
	}
	var versions []string
	named := map[string]bool{}
	for i, m := range e.members {
		m.id = sts[i].Header.MemberId
		for _, o := range e.members[:i] {
			if o.id == m.id {
				return fmt.Errorf("--endpoints %s and %s: the same member (%x)", o.url, m.url, m.id)
			}
		}
		pm, ok := byID[m.id]
		if !ok {
			return fmt.Errorf("--endpoints %s: member %x is not in the member list", m.url, m.id)
		}
		delete(byID, m.id)
		m.name = pm.Name
		// The name goes into proxy names and the history: one it cannot
		// be, or one taken, is replaced by the member's position.
		if links.CheckName(m.name) != nil || named[m.name] {
			m.name = MemberName(i)
		}
		named[m.name] = true
		if !slices.Contains(versions, sts[i].Version) {
			versions = append(versions, sts[i].Version)
		}
	}
	if len(byID) > 0 {
		var missing []string
		for _, pm := range byID {
			missing = append(missing, fmt.Sprintf("%s %v", pm.Name, pm.ClientURLs))
		}
		slices.Sort(missing)
		return fmt.Errorf("--endpoints: the cluster has %d members, and none of the endpoints is %s: give one per member",
			len(list.Members), strings.Join(missing, ", "))
	}
	e.version = strings.Join(versions, "/")
	return nil
}

// firstStatus asks m for its status, for Connect, whose error says in
// words what went wrong.
func (e *External) firstStatus(ctx context.Context, m *externalMember) (*pb.StatusResponse, error) {
	sctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	st, err := m.maint.Status(sctx, &pb.StatusRequest{})
	switch {
	case err == nil:
		return st, nil
	case sctx.Err() != nil:
		return nil, fmt.Errorf("--endpoints %s: no answer to Status within %v", m.url, statusTimeout)
	case e.direct != nil && e.direct.Certificates == nil:
		// With TLS 1.3 a member that wants a client certificate may refuse
		// it after the handshake, and the client sees only a broken
		// connection.
		return nil, fmt.Errorf("--endpoints %s: Status: %v (and no client certificate was given: --cert, --key)", m.url, err)
	}
	return nil, fmt.Errorf("--endpoints %s: Status: %v", m.url, err)
}

// checkPrefix refuses a prefix whose Close would delete more than
// locktest's own keys.
func checkPrefix(p string) error {
	if !strings.HasSuffix(p, "/") || strings.Trim(p, "/") == "" {
		return fmt.Errorf("cluster: prefix %q: want a path of its own ending in /, such as /locktest/<run>/ (Close deletes what is under it)", p)
	}
	return nil
}

// Describe says what the cluster is: "etcd 3.5.17, external cluster of 3
// members (m0 https://10.0.0.1:2379, ...)".
func (e *External) Describe() string {
	ms := make([]string, len(e.members))
	for i, m := range e.members {
		ms[i] = m.name + " " + m.url
	}
	return fmt.Sprintf("etcd %s, external cluster of %d members (%s)", e.version, len(e.members), strings.Join(ms, ", "))
}

// Etcd is the etcd the cluster runs, as its members report it (versions
// joined by "/" when they differ).
func (e *External) Etcd() Etcd { return Etcd{Version: e.version} }

// Hint says where the member faults an external cluster lacks are to be
// had.
func (e *External) Hint() string {
	return "faults on members need --cluster process or --cluster embedded, where locktest runs the members"
}

// MemberNames names the members in the order of the endpoints: their etcd
// names.
func (e *External) MemberNames() []string {
	out := make([]string, len(e.members))
	for i, m := range e.members {
		out[i] = m.name
	}
	return out
}

// LogDir is where External and its in-process toxiproxy log; the members
// log where their owners have them log.
func (e *External) LogDir() string { return e.cfg.LogDir }

// linkName names client's proxy to member m.
func (e *External) linkName(client string, m *externalMember) string {
	return e.token + client + "->" + m.name
}

// Endpoints returns the addresses of client's proxies to every member, in
// member order, creating them on first use.
func (e *External) Endpoints(client string) ([]string, error) {
	if err := links.CheckName(client); err != nil {
		return nil, err
	}
	if err := e.Check(); err != nil {
		return nil, err
	}
	eps := make([]string, len(e.members))
	for i, m := range e.members {
		addr, err := e.links.Proxy(e.linkName(client, m), m.addr)
		if err != nil {
			return nil, err
		}
		eps[i] = addr
	}
	return eps, nil
}

// LinkProtocol says the client links carry HTTP/2 (gRPC), or TLS, which
// no proxy can read: see system.Multiplexed.
func (e *External) LinkProtocol() string {
	if e.proxied != nil {
		return "tls"
	}
	return "h2"
}

// Links returns client's proxies to every member, in member order, fresh
// from the toxiproxy API.
func (e *External) Links(client string) ([]*toxiclient.Proxy, error) {
	if _, err := e.Endpoints(client); err != nil {
		return nil, err
	}
	ps := make([]*toxiclient.Proxy, len(e.members))
	for i, m := range e.members {
		p, err := e.links.Get(e.linkName(client, m))
		if err != nil {
			return nil, err
		}
		ps[i] = p
	}
	return ps, nil
}

// ClearToxics removes every toxic from our links and enables those
// disabled: the resource's (Base.ClearToxics) and the members' on a
// toxiproxy-server.
func (e *External) ClearToxics() error {
	err := e.Base.ClearToxics()
	if err == nil && e.links != e.Proxies {
		err = e.links.ClearToxics()
	}
	return err
}

// Client dials client's proxied endpoints. The caller may Close it; Close
// of the External closes it in any case.
func (e *External) Client(client string) (*clientv3.Client, error) {
	eps, err := e.Endpoints(client)
	if err != nil {
		return nil, err
	}
	return dial(&e.Base, clientConfigTLS(eps, e.proxied))
}

// DirectClient dials the given members (all, if none are given) at their
// own URLs, not through toxiproxy. The caller may Close it; Close of the
// External closes it in any case.
func (e *External) DirectClient(members ...int) (*clientv3.Client, error) {
	if len(members) == 0 {
		for i := range e.members {
			members = append(members, i)
		}
	}
	eps := make([]string, 0, len(members))
	for _, i := range members {
		if i < 0 || i >= len(e.members) {
			return nil, fmt.Errorf("cluster: no member %d", i)
		}
		eps = append(eps, e.members[i].url)
	}
	return dial(&e.Base, clientConfigTLS(eps, e.direct))
}

// statuses asks every member for its status.
func (e *External) statuses(ctx context.Context) ([]*pb.StatusResponse, error) {
	if err := e.Check(); err != nil {
		return nil, err
	}
	out := make([]*pb.StatusResponse, len(e.members))
	for i, m := range e.members {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := m.maint.Status(sctx, &pb.StatusRequest{})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("cluster: status of %s: %w", m.name, err)
		}
		out[i] = st
	}
	return out, nil
}

// pollEvery is how often External polls the members: each poll is a
// request to every member, which may be far away.
const pollEvery = 20 * time.Millisecond

// Leader returns the index of the member every member names as leader,
// waiting until they agree or ctx ends.
func (e *External) Leader(ctx context.Context) (int, error) {
	return awaitLeader(ctx, pollEvery, e.leaderNow)
}

func (e *External) leaderNow(ctx context.Context) (int, error) {
	sts, err := e.statuses(ctx)
	if err != nil {
		return -1, err
	}
	views := make([]string, len(sts))
	for i, st := range sts {
		views[i] = fmt.Sprintf("%s:%x", e.members[i].name, st.Leader)
		if st.Leader == 0 || st.Leader != sts[0].Leader {
			return -1, fmt.Errorf("cluster: members do not agree on a leader (%s)", strings.Join(views[:i+1], " "))
		}
	}
	for i, m := range e.members {
		if m.id == sts[0].Leader {
			return i, nil
		}
	}
	return -1, fmt.Errorf("cluster: leader %x is not a member", sts[0].Leader)
}

// adminClient is the direct client to every member that Connect made.
func (e *External) adminClient() (*clientv3.Client, error) {
	if err := e.Check(); err != nil {
		return nil, err
	}
	return e.admin, nil
}

// Close closes the clients, deletes every key under the prefix (through a
// direct client) and logs how many, deletes our proxies and stops the
// in-process toxiproxy. Leases the clients granted are left to expire.
// Idempotent; safe after a failed Connect.
func (e *External) Close() error {
	var errs []error
	// Base.Close closes the workload's clients (Track) first, so that none
	// writes after the cleanup.
	return e.Base.Close(func() {
		if e.admin != nil {
			if e.owned {
				errs = append(errs, e.deletePrefix())
			}
			e.admin.Close()
		}
		if e.stopOwner != nil {
			e.stopOwner()
		}
		for _, m := range e.members {
			m.cli.Close()
		}
		if e.links != nil && e.links != e.Proxies {
			errs = append(errs, e.links.Close())
		}
	}, func() error {
		return errors.Join(append(errs, e.log.Close())...)
	})
}

// deletePrefix deletes every key under the prefix, and logs how many.
func (e *External) deletePrefix() error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanTimeout)
	defer cancel()
	resp, err := e.admin.Delete(ctx, e.cfg.Prefix, clientv3.WithPrefix())
	if err != nil {
		e.logger.Printf("deleting the keys under %s: %v", e.cfg.Prefix, err)
		return fmt.Errorf("cluster: deleting the keys under %s: %w", e.cfg.Prefix, err)
	}
	e.logger.Printf("deleted %d keys under %s", resp.Deleted, e.cfg.Prefix)
	return nil
}
