// Package redisserver runs real redis-server processes for a run, as the
// system under test of a Redis lock: a single master, a master with a
// replica watched by Sentinel, or independent masters for Redlock. Every
// client reaches every server over links of its own behind toxiproxy, and
// the faults that strike the servers themselves are methods here: pause,
// crash, restart without data, failover, and an emulated clock jump.
//
// Every process is a proc.Process (none outlives locktest), listens on
// 127.0.0.1 on a port from ports.Reserve, keeps nothing on disk (no RDB
// snapshots, no AOF, replicas load a full sync from the socket), logs to
// LogDir/redis-<name>.log and reports expired and deleted keys as keyspace
// events (Events).
//
// Names: data servers are r0, r1, ... (Servers), Sentinels s0, s1, s2
// (Sentinels). In Replicated, r0 starts as the master and r1 as its
// replica; Sentinel is `redis-server --sentinel`, quorum 2, monitoring the
// master under the name MasterName at its direct address. A client's
// proxies are "<client>-><name>" ("c1->r0", "c1->s0"); the replica's link
// to its master is the proxy "replication:r1->r0".
//
// How clients find the master after a failover: as real ones do, by asking
// Sentinel. A client's Dialer routes every direct address Sentinel hands
// out (the master's, the other Sentinels') over that client's own proxy to
// it, so a Sentinel-following client (go-redis's failover client) under
// test follows the master and still suffers its own link faults.
package redisserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/locktest/locktest/backend/serverkit"
	"github.com/locktest/locktest/internal/ports"
	"github.com/locktest/locktest/internal/proc"
)

// MasterName is the name Sentinel monitors the master under.
const MasterName = "locktest"

// startAttempts is how often Start tries fresh ports when a server finds
// its port taken (another process bound it after ports.Reserve checked it).
const startAttempts = 5

// Server is one redis-server process: a data server or a Sentinel.
type Server struct {
	Index int    // position in Servers() or Sentinels()
	Name  string // "r0", "s0"
	// Addr is the direct address, "127.0.0.1:port": for observers and
	// admin; clients under test use their proxies (Endpoints).
	Addr string

	sentinel bool
	dir      string
	log      string
	args     []string
	client   *redis.Client // direct, for admin and observers
	proc     serverkit.Proc
}

// Pid is the ID of the server's current process (after a Restart, the new
// one's).
func (s *Server) Pid() int { return s.proc.Pid() }

// Client is a direct client of the server (of a Sentinel, for SENTINEL
// commands), owned by the deployment: for observers and admin, never for a
// client under test. After a Restart it reconnects by itself.
func (s *Server) Client() *redis.Client { return s.client }

// Deployment is a started topology. Its methods are safe for concurrent
// use.
type Deployment struct {
	serverkit.Base // its Dir holds the servers' directories
	cfg            Config
	servers        []*Server
	sentinels      []*Server
}

// Start starts toxiproxy and the servers of cfg.Topology, and returns once
// every server answers PING, the replica is in sync with its master, and
// every Sentinel knows the master, its replica and the other Sentinels. If
// ctx has no deadline cfg.StartTimeout applies. On error everything started
// has been stopped.
func Start(ctx context.Context, cfg Config) (*Deployment, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	quietGoRedis()
	d := &Deployment{cfg: cfg, Base: serverkit.Base{Name: "redisserver"}}
	if err := serverkit.Start(ctx, cfg.StartTimeout, d.start, d.Close); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *Deployment) start(ctx context.Context) error {
	if err := d.Open(d.cfg.Dir, d.cfg.LogDir, "redis"); err != nil {
		return err
	}

	t := d.cfg.Topology
	for i, name := range t.Names() {
		if err := d.addServer(&d.servers, name, i, false); err != nil {
			return err
		}
	}
	if t.replicated {
		for i := range 3 {
			if err := d.addServer(&d.sentinels, "s"+strconv.Itoa(i), i, true); err != nil {
				return err
			}
		}
	}
	return serverkit.Retry(startAttempts, func(int) error { return d.startAttempt(ctx) }, d.stop)
}

// addServer adds server i called name, with its directory and an empty
// log.
func (d *Deployment) addServer(to *[]*Server, name string, i int, sentinel bool) error {
	s := &Server{Index: i, Name: name, sentinel: sentinel}
	s.dir = filepath.Join(d.Dir, s.Name)
	if err := os.Mkdir(s.dir, 0o755); err != nil {
		return fmt.Errorf("redisserver: %w", err)
	}
	s.log = filepath.Join(d.LogDir, "redis-"+s.Name+".log")
	if err := os.WriteFile(s.log, nil, 0o644); err != nil { // emptied; proc appends to it
		return fmt.Errorf("redisserver: %w", err)
	}
	*to = append(*to, s)
	return nil
}

// nodes is every process: the data servers, then the Sentinels.
func (d *Deployment) nodes() []*Server {
	return append(append([]*Server(nil), d.servers...), d.sentinels...)
}

// startAttempt starts everything on fresh ports and waits until it is
// ready.
func (d *Deployment) startAttempt(ctx context.Context) error {
	nodes := d.nodes()
	ps, err := d.Reserve(len(nodes))
	if err != nil {
		return err
	}
	for i, s := range nodes {
		s.Addr = net.JoinHostPort(ports.Host, strconv.Itoa(ps[i]))
		s.client = redis.NewClient(adminOptions(s.Addr))
	}
	// Afresh for each attempt: the replication link's upstream is the
	// master's address of this one.
	if err := d.StartLinks(d.cfg.LogDir); err != nil {
		return err
	}

	for i, s := range d.servers {
		s.args = serverArgs(s, "")
		if d.cfg.Topology.replicated && i == 1 {
			upstream, err := d.Proxies.Proxy(replicationLink, d.servers[0].Addr)
			if err != nil {
				return err
			}
			s.args = serverArgs(s, upstream)
		}
	}
	if err := d.writeSentinelConfigs(); err != nil {
		return err
	}
	for _, s := range d.servers {
		if err := d.startProcess(s, s.args); err != nil {
			return err
		}
	}
	if err := d.waitServers(ctx); err != nil {
		return err
	}
	// The Sentinels start once the servers answer: a Sentinel counts a
	// master's silence from its own start, and on a loaded machine
	// Sentinels started beside the master declared it down before it
	// listened, and failed it over before the run began.
	for _, s := range d.sentinels {
		if err := d.startProcess(s, s.args); err != nil {
			return err
		}
	}
	return d.waitSentinels(ctx)
}

// replicationLink is the proxy between the replica and its master. Its
// ':' keeps it apart from every client's proxies (links.CheckName).
const replicationLink = "replication:r1->r0"

// serverArgs is how a data server runs: on loopback, nothing on disk, log
// to stdout, keyspace events for every change to a key, and a replica of
// replicaOf ("host:port") when that is set.
func serverArgs(s *Server, replicaOf string) []string {
	host, port, _ := net.SplitHostPort(s.Addr)
	args := []string{
		"--port", port, "--bind", host, "--dir", s.dir,
		"--daemonize", "no", "--logfile", "",
		"--save", "", "--appendonly", "no",
		// K: keyspace channels (__keyspace@0__:<key>); A: every class of
		// event, expired (x) and generic deletes (g) among them.
		"--notify-keyspace-events", "KA",
		// Ten times Redis's default: the active expiry cycle runs every
		// 10 ms, so an expired key is deleted, and reported, promptly.
		"--hz", "100",
		// A full sync straight from socket to socket: nothing on disk, and
		// no 5 s wait for more replicas to join it.
		"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
		"--repl-diskless-load", "on-empty-db",
	}
	if replicaOf != "" {
		h, p, _ := net.SplitHostPort(replicaOf)
		args = append(args, "--replicaof", h, p)
	}
	return args
}

// quietFailoverTimeout is the Sentinels' failover-timeout until Failover.
// Sentinel re-points a replica that replicates from an address other than
// the master's it monitors once failover-timeout has passed since it saw
// the replica's configuration (+fix-slave-config): with a short timeout
// it took the replica off its proxied link within seconds of the start,
// and replication ran where no cut could reach it.
const quietFailoverTimeout = 24 * time.Hour

// writeSentinelConfigs writes each Sentinel's config file, in which it
// already knows the replica and the other Sentinels (by IDs chosen here),
// so that it need not wait for their hello messages (every 2 s) before it
// can vote.
func (d *Deployment) writeSentinelConfigs() error {
	if len(d.sentinels) == 0 {
		return nil
	}
	ids := make([]string, len(d.sentinels))
	for i := range ids {
		var b [20]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		ids[i] = hex.EncodeToString(b[:])
	}
	master, replica := d.servers[0], d.servers[1]
	for i, s := range d.sentinels {
		host, port, _ := net.SplitHostPort(s.Addr)
		var b strings.Builder
		fmt.Fprintf(&b, "port %s\nbind %s\ndir %s\ndaemonize no\nlogfile \"\"\n", port, host, s.dir)
		fmt.Fprintf(&b, "sentinel myid %s\n", ids[i])
		fmt.Fprintf(&b, "sentinel monitor %s %s 2\n", MasterName, strings.Replace(master.Addr, ":", " ", 1))
		fmt.Fprintf(&b, "sentinel down-after-milliseconds %s %d\n", MasterName, d.cfg.DownAfter.Milliseconds())
		fmt.Fprintf(&b, "sentinel failover-timeout %s %d\n", MasterName, quietFailoverTimeout.Milliseconds())
		fmt.Fprintf(&b, "sentinel known-replica %s %s\n", MasterName, strings.Replace(replica.Addr, ":", " ", 1))
		for j, o := range d.sentinels {
			if j != i {
				fmt.Fprintf(&b, "sentinel known-sentinel %s %s %s\n", MasterName, strings.Replace(o.Addr, ":", " ", 1), ids[j])
			}
		}
		conf := filepath.Join(s.dir, "sentinel.conf")
		if err := os.WriteFile(conf, []byte(b.String()), 0o644); err != nil {
			return fmt.Errorf("redisserver: %w", err)
		}
		s.args = []string{conf, "--sentinel"}
	}
	return nil
}

func (d *Deployment) startProcess(s *Server, args []string) error {
	if err := s.proc.Start(proc.Spec{Path: d.cfg.Binary.Path, Args: args, Dir: s.dir, Log: s.log}); err != nil {
		return fmt.Errorf("redisserver: %s: %w", s.Name, err)
	}
	return nil
}

// waitServers waits until every data server answers PING and the
// replica's link to its master is up.
func (d *Deployment) waitServers(ctx context.Context) error {
	if err := waitPing(ctx, d.servers); err != nil {
		return err
	}
	if !d.cfg.Topology.replicated {
		return nil
	}
	replica := d.servers[1]
	err := waitFor(ctx, replica, "its link to the master", func(ctx context.Context) error {
		info, err := replica.client.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "master_link_status:up") {
			return errors.New("master_link_status is not up")
		}
		return nil
	})
	return err
}

// waitSentinels waits until every Sentinel answers and knows the master as
// up, its replica and the other Sentinels.
func (d *Deployment) waitSentinels(ctx context.Context) error {
	if err := waitPing(ctx, d.sentinels); err != nil {
		return err
	}
	for _, s := range d.sentinels {
		err := waitFor(ctx, s, "Sentinel to know the master, the replica and the other Sentinels", func(ctx context.Context) error {
			m, err := sentinelMaster(ctx, s)
			if err != nil {
				return err
			}
			if m["flags"] != "master" || m["num-slaves"] != "1" || m["num-other-sentinels"] != strconv.Itoa(len(d.sentinels)-1) {
				return fmt.Errorf("the Sentinel says flags=%s num-slaves=%s num-other-sentinels=%s", m["flags"], m["num-slaves"], m["num-other-sentinels"])
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// waitPing waits until every one of servers answers PING.
func waitPing(ctx context.Context, servers []*Server) error {
	for _, s := range servers {
		if err := waitFor(ctx, s, "PING", func(ctx context.Context) error { return s.client.Ping(ctx).Err() }); err != nil {
			return err
		}
	}
	return nil
}

// sentinelMaster is SENTINEL MASTER as a map.
func sentinelMaster(ctx context.Context, s *Server) (map[string]string, error) {
	v, err := s.client.Do(ctx, "SENTINEL", "MASTER", MasterName).Slice()
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for i := 0; i+1 < len(v); i += 2 {
		m[fmt.Sprint(v[i])] = fmt.Sprint(v[i+1])
	}
	return m, nil
}

// waitFor polls cond on s until it succeeds, s's process exits (the error
// then quotes the end of its log), or ctx ends.
func waitFor(ctx context.Context, s *Server, what string, cond func(context.Context) error) error {
	w := serverkit.Wait{Every: 5 * time.Millisecond, Try: time.Second,
		What: fmt.Sprintf("redisserver: waiting for %s (%s)", what, s.Name), Proc: &s.proc, Who: "redisserver: " + s.Name}
	return w.Until(ctx, cond)
}

// adminOptions is how the deployment's own direct clients connect: no
// retries (callers poll), short timeouts, no handshake extras that Redis 7.0
// refuses.
func adminOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:                     addr,
		Protocol:                 2,
		DialTimeout:              time.Second,
		ReadTimeout:              time.Second,
		WriteTimeout:             time.Second,
		MaxRetries:               -1,
		DialerRetries:            1, // go-redis would retry a refused dial 5 times, 100 ms apart
		ContextTimeoutEnabled:    true,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
}

// quietGoRedis points go-redis's process-wide logger, which otherwise
// writes to stderr (a dropped connection, a pubsub reconnecting), at
// nothing: a run writes nothing to the terminal but its own report.
var quietGoRedis = sync.OnceFunc(func() { redis.SetLogger(discard{}) })

type discard struct{}

func (discard) Printf(context.Context, string, ...any) {}

// stop kills every process, closes the admin clients and the links and
// releases the ports: what a failed start attempt and Close undo.
func (d *Deployment) stop() error {
	var wg sync.WaitGroup
	for _, s := range d.nodes() {
		wg.Go(func() { s.proc.Kill() })
	}
	wg.Wait()
	for _, s := range d.nodes() {
		if s.client != nil {
			s.client.Close()
		}
	}
	if d.Proxies != nil {
		d.Proxies.Close()
	}
	d.ReleasePorts()
	return nil
}

// Close stops everything Start started: the subscriptions of Events, every
// process (SIGKILL: there is nothing on disk to save), the links, and
// removes the servers' directories. Idempotent; safe after a failed Start.
func (d *Deployment) Close() error {
	return d.Base.Close(nil, d.stop)
}

// Topology is the deployment's topology.
func (d *Deployment) Topology() Topology { return d.cfg.Topology }

// Servers returns the data servers in order (r0, r1, ...).
func (d *Deployment) Servers() []*Server { return append([]*Server(nil), d.servers...) }

// Sentinels returns the Sentinels in order (s0, s1, s2); none unless
// Replicated.
func (d *Deployment) Sentinels() []*Server { return append([]*Server(nil), d.sentinels...) }

// Binary is the redis-server the deployment runs.
func (d *Deployment) Binary() Binary { return d.cfg.Binary }
