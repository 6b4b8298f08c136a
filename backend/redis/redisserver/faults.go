package redisserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"

	"github.com/locktest/locktest/backend/serverkit"
	"github.com/locktest/locktest/system"
)

// The faults that strike the data servers themselves. Faults on a client's
// links are toxics on its proxies (Links, Toxiproxy, ClearToxics). Each
// takes a server's index in Servers(); they are serialised with each other
// and with Close.

// fault looks data server i up and takes the fault lock; it fails on a
// closed deployment.
func (d *Deployment) fault(i int) (*Server, func(), error) {
	return serverkit.FaultOn(&d.Base, d.servers, i)
}

// Pause freezes server i (SIGSTOP): it answers nothing, expires nothing and
// replicates nothing until Resume, while its clients' connections stay open
// and their commands wait. Its keys' TTLs run on the host clock meanwhile,
// so a key whose TTL passed during the pause is gone once it resumes. In
// Replicated, a pause of the master longer than Config.DownAfter makes
// Sentinel fail over to the replica.
func (d *Deployment) Pause(i int) error {
	s, unlock, err := d.fault(i)
	if err != nil {
		return err
	}
	defer unlock()
	return s.proc.Pause()
}

// Resume continues server i after Pause (SIGCONT).
func (d *Deployment) Resume(i int) error {
	s, unlock, err := d.fault(i)
	if err != nil {
		return err
	}
	defer unlock()
	return s.proc.Resume()
}

// Crash kills server i (SIGKILL) and waits until it has exited. Its data
// is gone: nothing is on disk.
func (d *Deployment) Crash(i int) error {
	s, unlock, err := d.fault(i)
	if err != nil {
		return err
	}
	defer unlock()
	return s.proc.Kill()
}

// Running reports whether server i's process is alive (it may be paused).
func (d *Deployment) Running(i int) bool {
	if i < 0 || i >= len(d.servers) {
		return false
	}
	return d.servers[i].proc.Running()
}

// Restart starts server i again on its port, killing it first if it runs,
// and returns once it answers PING. It comes back empty, as a Redis without
// persistence does: every key it held is gone, fencing counters too. It
// runs with the arguments it first started with, except that in Replicated
// a server Sentinel now names master does not start as a replica; Sentinel
// then gives it whatever role it thinks right: an old master that comes
// back is made a replica of the new one, but only once it has been up for
// 8 s (four of Sentinel's fixed 2 s publish periods) and Sentinel has read
// its INFO again (every 10 s): until then it is a second, empty master.
func (d *Deployment) Restart(ctx context.Context, i int) error {
	s, unlock, err := d.fault(i)
	if err != nil {
		return err
	}
	defer unlock()
	if err := s.proc.Kill(); err != nil {
		return err
	}
	args := s.args
	if d.cfg.Topology.replicated {
		if m, err := d.master(ctx); err == nil && m == i {
			args = serverArgs(s, "")
		}
	}
	if err := d.startProcess(s, args); err != nil {
		return err
	}
	return waitFor(ctx, s, "PING after a restart", func(ctx context.Context) error { return s.client.Ping(ctx).Err() })
}

// Master returns the index of the data server that is master now: 0 in
// Single; in Replicated the one every Sentinel that answers names (an error
// while they disagree, as during a failover). Independent masters have no
// one master.
func (d *Deployment) Master(ctx context.Context) (int, error) {
	if err := d.Check(); err != nil {
		return -1, err
	}
	return d.master(ctx)
}

func (d *Deployment) master(ctx context.Context) (int, error) {
	switch {
	case d.cfg.Topology.replicated:
	case d.cfg.Topology.masters == 1:
		return 0, nil
	default:
		return -1, fmt.Errorf("redisserver: %s has no one master", d.cfg.Topology)
	}
	var named []string
	var errs []error
	for _, s := range d.sentinels {
		addr, err := s.client.Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MasterName).StringSlice()
		if err != nil || len(addr) != 2 {
			errs = append(errs, fmt.Errorf("%s: %v %v", s.Name, addr, err))
			continue
		}
		named = append(named, addr[0]+":"+addr[1])
	}
	if len(named) == 0 {
		return -1, fmt.Errorf("redisserver: no Sentinel answered: %w", errors.Join(errs...))
	}
	for _, a := range named[1:] {
		if a != named[0] {
			return -1, fmt.Errorf("redisserver: the Sentinels disagree on the master: %s", strings.Join(named, ", "))
		}
	}
	for _, s := range d.servers {
		if s.Addr == named[0] {
			return s.Index, nil
		}
	}
	return -1, fmt.Errorf("redisserver: Sentinel names %s, not a server of this deployment", named[0])
}

// CutReplication cuts the replica's link to its master (Replicated): its
// proxy holds every byte both ways, so that whatever the master takes from
// now on, a lock among it, never reaches the replica. ClearToxics mends it
// (closing the held connection); the replica then resyncs.
func (d *Deployment) CutReplication() error {
	if !d.cfg.Topology.replicated {
		return fmt.Errorf("redisserver: %s has no replication link", d.cfg.Topology)
	}
	unlock, err := d.Fault()
	if err != nil {
		return err
	}
	defer unlock()
	return d.cutReplication()
}

func (d *Deployment) cutReplication() error {
	p, err := d.Proxies.Get(replicationLink)
	if err != nil {
		return err
	}
	if err := d.replicatesThrough(p.Listen); err != nil {
		return err
	}
	// Hold the data both ways and keep the connection open, rather than
	// disable the link: a replica whose link is down reconnects, and
	// Sentinel, seeing it replicate from an address other than the
	// master's, points it at the master directly (+fix-slave-config),
	// which would heal the cut behind the proxy's back.
	for _, dir := range []string{"upstream", "downstream"} {
		name := "replication-cut-" + dir
		if hasToxic(p.ActiveToxics, name) {
			continue
		}
		if _, err := p.AddToxic(name, "timeout", dir, 1, toxiclient.Attributes{"timeout": 0}); err != nil {
			return fmt.Errorf("redisserver: cutting replication: %w", err)
		}
	}
	return nil
}

// adminPatience bounds how long a fault without a context of its own asks
// a server again that does not answer.
const adminPatience = 10 * time.Second

// Failover loses the master the way asynchronous replication loses data
// (Replicated only): it cuts the replication link (CutReplication, if not
// cut already), so that what the master took since then never reaches the
// replica; kills the master (SIGKILL); and waits until Sentinel has
// promoted the replica: every Sentinel names it and it answers ROLE as
// master. Clients that ask Sentinel for the master (through Dialer) then
// reach the new one; a lock taken on the old master after the cut is not
// there. Sentinel promotes in about DownAfter + 1 s; ctx bounds the wait.
//
// Failover runs from the starting roles (r0 master, r1 replicating through
// its proxy); once r1 is master there is no proxied replication link left
// to cut, and a second Failover is refused. Restart(ctx, 0) brings the old
// master back, empty; Sentinel makes it a replica of r1 later (Restart).
func (d *Deployment) Failover(ctx context.Context) (system.Promotion, error) {
	if !d.cfg.Topology.replicated {
		return system.Promotion{}, fmt.Errorf("redisserver: %s has no replica to fail over to", d.cfg.Topology)
	}
	unlock, err := d.Fault()
	if err != nil {
		return system.Promotion{}, err
	}
	defer unlock()
	old, replica := d.servers[0], d.servers[1]
	if m, err := d.master(ctx); err != nil {
		return system.Promotion{}, err
	} else if m != old.Index {
		return system.Promotion{}, fmt.Errorf("redisserver: failover: %s is master already; Failover runs from the starting roles only", d.servers[m].Name)
	}
	if err := d.cutReplication(); err != nil {
		return system.Promotion{}, err
	}
	for _, s := range d.sentinels {
		// Asked again until it answers: one reply late on a loaded
		// machine (the admin clients wait a second) failed the failover.
		err := waitFor(ctx, s, s.Name+" to set its failover-timeout", func(ctx context.Context) error {
			return s.client.Do(ctx, "SENTINEL", "SET", MasterName, "failover-timeout", d.cfg.FailoverTimeout.Milliseconds()).Err()
		})
		if err != nil {
			return system.Promotion{}, fmt.Errorf("redisserver: setting %s's failover-timeout: %w", s.Name, err)
		}
	}
	start := time.Now()
	if err := old.proc.Kill(); err != nil {
		return system.Promotion{}, err
	}
	err = waitFor(ctx, replica, "Sentinel to promote the replica", func(ctx context.Context) error {
		if m, err := d.master(ctx); err != nil {
			return err
		} else if m != replica.Index {
			return fmt.Errorf("the Sentinel still names %s", d.servers[m].Name)
		}
		role, err := replica.client.Do(ctx, "ROLE").Slice()
		if err != nil {
			return err
		}
		if len(role) == 0 || role[0] != "master" {
			return fmt.Errorf("%s says ROLE %v", replica.Name, role)
		}
		return nil
	})
	if err != nil {
		return system.Promotion{}, err
	}
	how := fmt.Sprintf("%s killed (SIGKILL); 3 Sentinels (quorum 2, down-after %s) agreed it was down, elected a leader, which promoted %s",
		old.Name, d.cfg.DownAfter, replica.Name)
	return system.Promotion{Old: old.Index, New: replica.Index, How: how, Took: time.Since(start)}, nil
}

// expireScript makes every key matching ARGV[1] that has a TTL expire in
// 50 ms, and returns them. Keys without a TTL (fencing counters) stay, as
// they would through a clock jump. Not in 1 ms: PEXPIRE reads the clock
// twice, for the base of the TTL and to see whether it has already passed,
// and deletes the key at once (a "del", not an "expired") when the second
// read is a millisecond on (TestExpireEarly, two suites at once: "del").
const expireScript = `
local keys = {}
for _, k in ipairs(redis.call('KEYS', ARGV[1])) do
  if redis.call('PTTL', k) > 0 then
    redis.call('PEXPIRE', k, 50)
    keys[#keys + 1] = k
  end
end
return keys`

// ExpireEarly is an EMULATION of a forward jump of server i's clock: it
// makes every key matching pattern (a glob, e.g. prefix+"*") that has a
// TTL expire now, and returns those keys once they are gone (reported as
// "expired", as a real expiry is). A real jump cannot be had: every server
// shares the host's clock, and libfaketime cannot start Debian's
// redis-server. Unlike a real jump it moves no other time on the server
// (no TTL set later is shortened), and it runs a script, which must run on
// a master.
func (d *Deployment) ExpireEarly(ctx context.Context, i int, pattern string) ([]string, error) {
	s, unlock, err := d.fault(i)
	if err != nil {
		return nil, err
	}
	defer unlock()
	keys, err := s.client.Eval(ctx, expireScript, nil, pattern).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("redisserver: expiring %s on %s: %w", pattern, s.Name, err)
	}
	if len(keys) == 0 {
		return nil, nil
	}
	// EXISTS deletes an expired key it touches, so this returns as soon as
	// their 50 ms have passed.
	err = waitFor(ctx, s, "the keys to expire", func(ctx context.Context) error {
		n, err := s.client.Exists(ctx, keys...).Result()
		if err == nil && n > 0 {
			err = fmt.Errorf("%d keys left", n)
		}
		return err
	})
	return keys, err
}

// replicatesThrough checks that the replica replicates from link, the
// listen address of its proxy: a cut of a link the replica does not use
// would be no cut at all.
func (d *Deployment) replicatesThrough(link string) error {
	replica := d.servers[1]
	// Asked again until it answers, for a while: one reply late on a
	// loaded machine failed the cut.
	ctx, cancel := context.WithTimeout(context.Background(), adminPatience)
	defer cancel()
	var info string
	err := waitFor(ctx, replica, replica.Name+"'s replication", func(ctx context.Context) (err error) {
		info, err = replica.client.Info(ctx, "replication").Result()
		return err
	})
	if err != nil {
		return fmt.Errorf("redisserver: reading %s's replication: %w", replica.Name, err)
	}
	var host, port string
	for _, l := range strings.Split(info, "\n") {
		l = strings.TrimSpace(l)
		if v, ok := strings.CutPrefix(l, "master_host:"); ok {
			host = v
		}
		if v, ok := strings.CutPrefix(l, "master_port:"); ok {
			port = v
		}
	}
	if net.JoinHostPort(host, port) != link {
		return fmt.Errorf("redisserver: %s replicates from %s:%s, not through its link %s", replica.Name, host, port, link)
	}
	return nil
}

// Expiring returns the keys matching pattern that have a TTL on server i,
// the keys ExpireEarly would expire now; an error for a replica, whose
// keys expire with its master's.
func (d *Deployment) Expiring(ctx context.Context, i int, pattern string) ([]string, error) {
	if i < 0 || i >= len(d.servers) {
		return nil, fmt.Errorf("redisserver: no server %d", i)
	}
	s := d.servers[i]
	role, err := s.client.Do(ctx, "ROLE").Slice()
	if err != nil {
		return nil, fmt.Errorf("redisserver: %s: %w", s.Name, err)
	}
	if len(role) == 0 || role[0] != "master" {
		return nil, fmt.Errorf("redisserver: %s is a replica: its keys expire with its master's", s.Name)
	}
	var keys []string
	for _, k := range s.client.Keys(ctx, pattern).Val() {
		if s.client.PTTL(ctx, k).Val() > 0 {
			keys = append(keys, k)
		}
	}
	return keys, nil
}

func hasToxic(ts toxiclient.Toxics, name string) bool {
	for _, t := range ts {
		if t.Name == name {
			return true
		}
	}
	return false
}
