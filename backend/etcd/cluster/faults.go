package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	"go.etcd.io/etcd/server/v3/embed"
)

// Faults on the members themselves: partitions between members (rafthttp's
// CutPeer/MendPeer on both sides of a link), hard stops and restarts, paused
// members. Faults on client links are
// toxics on the links' proxies (Link, Links, Toxiproxy).
//
// All of them are safe for concurrent use; they are serialised with each
// other and with Close.

// pauseToxic is the name of the toxics PauseMember puts on a member's client
// links.
const pauseToxic = "cluster-pause"

// ErrMemberDown is returned for a member that is hard-stopped.
var ErrMemberDown = errors.New("cluster: member is down")

func (c *Cluster) member(i int) (*Member, error) {
	if i < 0 || i >= len(c.members) {
		return nil, fmt.Errorf("cluster: no member %d", i)
	}
	return c.members[i], nil
}

// Running reports whether member i is up (not hard-stopped).
func (c *Cluster) Running(i int) bool {
	m, err := c.member(i)
	return err == nil && m.running()
}

// Paused reports whether member i is paused by PauseMember.
func (c *Cluster) Paused(i int) bool {
	m, err := c.member(i)
	if err != nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.paused
}

// faultMember looks member i up and takes the fault lock, which keeps faults
// on members and Close from interleaving; it fails on a closed cluster.
func (c *Cluster) faultMember(i int) (*Member, func(), error) {
	m, err := c.member(i)
	if err != nil {
		return nil, nil, err
	}
	unlock, err := c.Fault()
	if err != nil {
		return nil, nil, err
	}
	return m, unlock, nil
}

// --- partitions between members ---

func pair(a, b int) [2]int {
	if a > b {
		a, b = b, a
	}
	return [2]int{a, b}
}

// SetCuts makes exactly the given member pairs (indices) cut: raft traffic
// between the two members of each pair is dropped in both directions
// (EtcdServer.CutPeer on both sides), and pairs cut before but not listed
// are mended. Pairs with a member that is down are remembered and applied
// when it restarts.
func (c *Cluster) SetCuts(pairs [][2]int) error {
	want := map[[2]int]bool{}
	for _, p := range pairs {
		if _, err := c.member(p[0]); err != nil {
			return err
		}
		if _, err := c.member(p[1]); err != nil {
			return err
		}
		if p[0] == p[1] {
			return fmt.Errorf("cluster: cannot cut member %d from itself", p[0])
		}
		want[pair(p[0], p[1])] = true
	}
	unlock, err := c.Fault()
	if err != nil {
		return err
	}
	defer unlock()
	for p := range c.cuts {
		if !want[p] {
			delete(c.cuts, p)
			c.setPeer(p[0], p[1], false)
			c.setPeer(p[1], p[0], false)
		}
	}
	for p := range want {
		if !c.cuts[p] {
			c.cuts[p] = true
			c.setPeer(p[0], p[1], true)
			c.setPeer(p[1], p[0], true)
		}
	}
	return nil
}

// setPeer cuts or mends from's view of to, if from is running. A process
// member's peers are cut at the relays: each drops the connections the
// other dialled.
func (c *Cluster) setPeer(from, to int, cut bool) {
	if c.cfg.Processes {
		c.storePeerCuts()
		if cut {
			c.members[from].relay.CutFrom(to)
		}
		return
	}
	m := c.members[from]
	if m.running() {
		m.server().cutPeer(c.members[to].id(), cut)
	}
}

// storePeerCuts publishes the cut pairs to the relays.
func (c *Cluster) storePeerCuts() {
	cuts := make(map[[2]int]bool, len(c.cuts))
	for p := range c.cuts {
		cuts[p] = true
	}
	c.peerCuts.Store(&cuts)
}

// peerCut reports whether the relay in front of member to must drop a
// connection from member from (-1: a dialler the relay could not tell,
// dropped while any cut touches to).
func (c *Cluster) peerCut(from, to int) bool {
	cuts := *c.peerCuts.Load()
	if from < 0 {
		for p := range cuts {
			if p[0] == to || p[1] == to {
				return true
			}
		}
		return false
	}
	return cuts[pair(from, to)]
}

// Partition splits the members into groups (lists of member indices): every
// pair of members in different groups is cut (see SetCuts), every other pair
// is mended. A member in no group is a group of its own.
func (c *Cluster) Partition(groups [][]int) error {
	group := make([]int, len(c.members))
	for i := range group {
		group[i] = -1
	}
	for g, ms := range groups {
		for _, i := range ms {
			if _, err := c.member(i); err != nil {
				return err
			}
			if group[i] >= 0 {
				return fmt.Errorf("cluster: member %d is in two groups", i)
			}
			group[i] = g
		}
	}
	for i := range group {
		if group[i] < 0 {
			group[i] = len(groups) + i
		}
	}
	var pairs [][2]int
	for a := range group {
		for b := a + 1; b < len(group); b++ {
			if group[a] != group[b] {
				pairs = append(pairs, [2]int{a, b})
			}
		}
	}
	return c.SetCuts(pairs)
}

// Heal mends every cut member pair.
func (c *Cluster) Heal() error { return c.SetCuts(nil) }

// Cuts returns the cut member pairs, sorted, each with the lower index first.
func (c *Cluster) Cuts() [][2]int {
	unlock, err := c.Fault()
	if err != nil {
		return nil
	}
	defer unlock()
	var ps [][2]int
	for p := range c.cuts {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool {
		return ps[i][0] < ps[j][0] || ps[i][0] == ps[j][0] && ps[i][1] < ps[j][1]
	})
	return ps
}

// --- crashes ---

// memberProxies returns the names of our proxies whose upstream is member
// m's client address (every client's link to m).
func (c *Cluster) memberProxies(m *Member) []string {
	return c.Proxies.To(m.ClientAddr())
}

// HardStopMember crashes member i: an embedded member's raft node stops at
// once, without a leadership transfer (EtcdServer.HardStop), and its
// connections are dropped; a process member gets SIGKILL. Its data
// directory is kept for RestartMember. Stopping a member that is down
// already does nothing.
func (c *Cluster) HardStopMember(i int) error {
	m, unlock, err := c.faultMember(i)
	if err != nil {
		return err
	}
	defer unlock()
	m.stop()
	return nil
}

// stop hard-stops the member's server once.
func (m *Member) stop() {
	m.mu.Lock()
	s, done := m.srv, m.down
	m.down = true
	m.mu.Unlock()
	if s != nil && !done {
		s.hardStop()
	}
}

func (m *Member) isDown() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.down
}

func (m *Member) isPaused() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.paused
}

// RestartMember restarts a hard-stopped member i from its data directory,
// with the same configuration and ports, and waits until it is ready and
// has applied everything the cluster had committed when it came up (so a
// restart inside a partition that cuts it off waits until ctx ends). Cuts
// that involve the member are applied to the new instance. Restarting a
// running member does nothing; a removed member (RemoveMember) has no data
// to restart from: AddMember brings it back.
func (c *Cluster) RestartMember(ctx context.Context, i int) error {
	m, err := c.member(i)
	if err != nil {
		return err
	}
	s, err := c.restart(m)
	if err != nil || s == nil {
		return err
	}
	if err := s.ready(ctx); err != nil {
		return fmt.Errorf("cluster: restarted %w", err)
	}
	return c.waitCaughtUp(ctx, m)
}

func (c *Cluster) restart(m *Member) (server, error) {
	unlock, err := c.Fault()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if m.isRemoved() {
		return nil, fmt.Errorf("%w: %s", ErrMemberRemoved, m.Name)
	}
	if !m.isDown() {
		return nil, nil
	}
	s, err := c.startServer(m, c.initial, embed.ClusterStateFlagNew)
	if err != nil {
		return nil, err
	}
	m.setServer(s)
	for p := range c.cuts {
		switch m.Index {
		case p[0]:
			c.setPeer(p[0], p[1], true)
		case p[1]:
			c.setPeer(p[1], p[0], true)
		}
	}
	return s, nil
}

// waitCaughtUp waits until m has applied the highest commit index any other
// running member reported when the wait began.
func (c *Cluster) waitCaughtUp(ctx context.Context, m *Member) error {
	var target uint64
	for _, o := range c.members {
		if o != m && o.running() && !o.isPaused() {
			if committed, _, err := o.server().indexes(ctx); err == nil {
				target = max(target, committed)
			}
		}
	}
	t := time.NewTicker(c.pollEvery())
	defer t.Stop()
	s := m.server()
	for {
		_, applied, err := s.indexes(ctx)
		if err == nil && applied >= target {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: member %s applied %d of %d: %w", m.Name, applied, target, ctx.Err())
		case <-s.stopped():
			return fmt.Errorf("cluster: member %s stopped while catching up", m.Name)
		case <-t.C:
		}
	}
}

// --- pauses ---

// PauseMember freezes member i as a stop-the-world pause would. A process
// member gets SIGSTOP: nothing in it runs until ResumeMember. An embedded
// member's raft transport stops sending and reading peer messages
// (EtcdServer.PauseSending) and every client link to it holds its data (a
// latency toxic of an hour in both directions); its clock and timers go on.
func (c *Cluster) PauseMember(i int) error {
	m, unlock, err := c.faultMember(i)
	if err != nil {
		return err
	}
	defer unlock()
	if !m.running() {
		return fmt.Errorf("%w: %s", ErrMemberDown, m.Name)
	}
	m.mu.Lock()
	already := m.paused
	m.paused = true
	m.mu.Unlock()
	if already {
		return nil
	}
	return m.server().pause()
}

// ResumeMember ends PauseMember.
func (c *Cluster) ResumeMember(i int) error {
	m, unlock, err := c.faultMember(i)
	if err != nil {
		return err
	}
	defer unlock()
	m.mu.Lock()
	was := m.paused
	m.paused = false
	m.mu.Unlock()
	switch {
	case !was:
		return nil
	case m.running():
		return m.server().resume()
	case !c.cfg.Processes:
		return c.holdLinks(m, false) // crashed while paused
	}
	return nil
}

// holdLinks holds (or releases) every client link to m: a latency toxic
// of an hour in both directions.
func (c *Cluster) holdLinks(m *Member, hold bool) error {
	var errs []error
	for _, name := range c.memberProxies(m) {
		p, err := c.Proxies.Get(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if hold {
			for _, dir := range []string{"upstream", "downstream"} {
				if _, err := p.AddToxic(pauseToxic+"-"+dir, "latency", dir, 1, toxiclient.Attributes{"latency": int(time.Hour / time.Millisecond)}); err != nil {
					errs = append(errs, fmt.Errorf("cluster: pausing link %s: %w", name, err))
				}
			}
			continue
		}
		for _, t := range p.ActiveToxics {
			if strings.HasPrefix(t.Name, pauseToxic) {
				if err := p.RemoveToxic(t.Name); err != nil {
					errs = append(errs, fmt.Errorf("cluster: releasing link %s: %w", name, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}
