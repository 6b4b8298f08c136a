package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
)

// Membership changes (system.Reconfigurer), made as an operator replacing a
// member makes them: RemoveMember has the other members remove one (the
// Cluster API's MemberRemove), stops it and wipes its data; AddMember has
// them add it back (MemberAdd) and starts it with empty data and
// initial-cluster-state "existing". The member comes back under its name,
// client address and peer relay, so every client's toxiproxy link to it
// works again, but as a new raft member, with a new ID.
//
// While a member is removed it is down: Running is false, Leader and
// Hashes leave it out, PauseMember fails with ErrMemberDown,
// HardStopMember does nothing, RestartMember fails with ErrMemberRemoved,
// and a DirectClient to it finds nothing listening until AddMember.
//
// etcd's strict reconfiguration check (on by default) refuses a change as
// "unhealthy cluster" until the member asked has been connected to enough
// of the others for 5 s (etcdserver.HealthInterval): so for a while after
// a start, a restart or an add. Both calls ask again while etcd says so,
// until ctx ends. A request etcd is deciding is not cut short by ctx's end,
// which would leave unknown whether the change was made: it has a deadline
// of its own.

// ErrMemberRemoved is returned for a member that is out of the cluster.
var ErrMemberRemoved = errors.New("cluster: member is removed")

const (
	// reconfigRetry is how often a change etcd refused as unhealthy is
	// asked again.
	reconfigRetry = 100 * time.Millisecond
	// reconfigTimeout bounds one request for a change: etcd answers
	// within its own request timeout (5 s and two election timeouts).
	reconfigTimeout = 10 * time.Second
)

// Removed reports whether member i is out of the cluster: removed by
// RemoveMember and not added back.
func (c *Cluster) Removed(i int) bool {
	m, err := c.member(i)
	return err == nil && m.isRemoved()
}

func (m *Member) isRemoved() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.removed
}

// id returns the member's raft ID, which AddMember changes.
func (m *Member) id() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ID
}

// inCluster returns the members that are not removed, in order.
func (c *Cluster) inCluster() []*Member {
	var ms []*Member
	for _, m := range c.members {
		if !m.isRemoved() {
			ms = append(ms, m)
		}
	}
	return ms
}

// RemoveMember removes member i from the cluster: the others, asked
// directly, commit its removal (MemberRemove); then it is stopped as
// HardStopMember stops a member, and its data directory is wiped. It may
// be down already (replacing a crashed member is the common case) but not
// paused. RemoveMember refuses, before asking etcd, when the rest could not
// keep a quorum: when fewer than a majority of the other members are up,
// not paused and cut from none of the others up.
func (c *Cluster) RemoveMember(ctx context.Context, i int) error {
	m, ask, err := c.removable(i)
	if err != nil {
		return err
	}
	cli, err := c.DirectClient(ask...)
	if err != nil {
		return err
	}
	defer cli.Close()
	id := m.id()
	if err := untilHealthy(ctx, func(rctx context.Context) error {
		_, err := cli.MemberRemove(rctx, id)
		if unanswered(rctx, err) || errors.Is(err, rpctypes.ErrMemberNotFound) {
			// No answer (see AddMember), or a removal asked again after
			// one made late finds no member: the member list says
			// whether it was made; an unread list, that it may not be.
			if _, listed, lerr := member(ctx, cli, func(peers []string, mid uint64) bool { return mid == id }); lerr == nil && !listed {
				return nil
			}
			return fmt.Errorf("%w: the removal had no answer or found no member, and the member list still has it or could not be read", rpctypes.ErrUnhealthy)
		}
		return err
	}); err != nil {
		return fmt.Errorf("cluster: removing member %s: %w", m.Name, err)
	}

	unlock, err := c.Fault()
	if err != nil {
		return err
	}
	defer unlock()
	m.mu.Lock()
	m.removed = true
	m.mu.Unlock()
	// A member stops by itself a second after it applies its own removal;
	// one cut off or down never learns of it.
	m.stop()
	if err := os.RemoveAll(m.dataDir); err != nil {
		return fmt.Errorf("cluster: wiping the data of %s: %w", m.Name, err)
	}
	return nil
}

// removable checks that member i may be removed and returns it with the
// members to ask: the others up, not paused and cut from none of the
// others up.
func (c *Cluster) removable(i int) (*Member, []int, error) {
	m, unlock, err := c.faultMember(i)
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	if m.isRemoved() {
		return nil, nil, fmt.Errorf("%w: %s", ErrMemberRemoved, m.Name)
	}
	if c.Paused(i) {
		return nil, nil, fmt.Errorf("cluster: member %s is paused: resume it before removing it", m.Name)
	}
	rest := 0
	var up []int
	for _, o := range c.inCluster() {
		if o == m {
			continue
		}
		rest++
		if o.running() && !c.Paused(o.Index) {
			up = append(up, o.Index)
		}
	}
	// A member cut from another one may be on a side without a quorum.
	whole := slices.DeleteFunc(slices.Clone(up), func(a int) bool {
		return slices.ContainsFunc(up, func(b int) bool { return c.cuts[pair(a, b)] })
	})
	if len(whole) < rest/2+1 {
		return nil, nil, fmt.Errorf("cluster: removing %s would lose the quorum: of the other %d members, %d are up, not paused and not cut off", m.Name, rest, len(whole))
	}
	return m, whole, nil
}

// AddMember adds removed member i back as a new member: once the members
// agree on a leader, those up, asked directly, commit its addition
// (MemberAdd, which gives it a new ID); then it starts with empty data and
// initial-cluster-state "existing", under its name, client address and
// peer relay, and the cuts in force that involve it are applied on both
// sides. AddMember returns once the member is ready, has applied
// everything the others had committed when it came up, and the others
// have applied its publication (they count it as started).
//
// Every member up must apply the addition before the new one starts: it
// checks its initial cluster against the member list of whichever peer
// answers first, and the cuts need its new ID. So a member of the cluster
// cut off from the leader holds AddMember up until ctx ends, and a paused
// one is refused.
func (c *Cluster) AddMember(ctx context.Context, i int) error {
	m, up, err := c.addable(i)
	if err != nil {
		return err
	}
	cli, err := c.DirectClient(up...)
	if err != nil {
		return err
	}
	defer cli.Close()
	// Without a leader (as after the leader's removal) the addition would
	// be dropped and time out.
	if _, err := c.Leader(ctx); err != nil {
		return fmt.Errorf("cluster: adding member %s: %w", m.Name, err)
	}
	var id uint64
	if err := untilHealthy(ctx, func(rctx context.Context) error {
		resp, err := cli.MemberAdd(rctx, []string{m.PeerURL})
		if err == nil {
			id = resp.Member.ID
		}
		if unanswered(rctx, err) || errors.Is(err, rpctypes.ErrPeerURLExist) {
			// No answer: raft drops a conf change proposed before a new
			// leader has applied its log, or forwarded to a leader just
			// gone, and etcd never answers it (an add back after the
			// leader's removal waited out the request's 10 s on a loaded
			// host). Whether it was made, the member list says: if not,
			// it is asked again; an add asked again after one made late
			// finds its peer URL taken.
			if found, ok, _ := member(ctx, cli, func(peers []string, _ uint64) bool { return slices.Contains(peers, m.PeerURL) }); ok {
				id = found
				return nil
			}
			return fmt.Errorf("%w: the addition had no answer or found its peer URL taken, and the member list lacks it", rpctypes.ErrUnhealthy)
		}
		if errors.Is(err, rpctypes.ErrMemberNotFound) {
			// etcd derives a new member's ID from its peer URLs and the
			// second it is added: the same URLs added again within the
			// second a member under them was removed get that removed ID,
			// which etcd refuses (ErrIDRemoved, "member not found"). The
			// next second gives a new ID.
			return rpctypes.ErrUnhealthy
		}
		return err
	}); err != nil {
		return fmt.Errorf("cluster: adding member %s: %w", m.Name, err)
	}
	// The member that answered had applied the addition.
	var idx uint64
	for _, j := range up {
		if o := c.members[j]; o.running() {
			if _, applied, err := o.server().indexes(ctx); err == nil {
				idx = max(idx, applied)
			}
		}
	}
	if err := c.waitApplied(ctx, up, idx); err != nil {
		return fmt.Errorf("cluster: adding member %s: %w", m.Name, err)
	}
	s, err := c.rejoin(m, id)
	if err != nil {
		return err
	}
	if err := s.ready(ctx); err != nil {
		return fmt.Errorf("cluster: added %w", err)
	}
	if err := c.waitCaughtUp(ctx, m); err != nil {
		return err
	}
	// The others count the new member as started once they have applied
	// its publication (its name and client URLs), which it applied before
	// it was ready; until then etcd refuses the next change as "not
	// enough started members" (a replacement right after an add, on a
	// loaded host: the publication applied by the member asked 8 ms
	// later).
	_, idx, err = s.indexes(ctx)
	if err != nil {
		return fmt.Errorf("cluster: added %s: %w", m.Name, err)
	}
	if err := c.waitApplied(ctx, up, idx); err != nil {
		return fmt.Errorf("cluster: added %s: %w", m.Name, err)
	}
	return nil
}

// unanswered says whether a request for a change had no answer: its own
// deadline passed, or etcd's (its request timeout, under the caller's).
func unanswered(rctx context.Context, err error) bool {
	return rctx.Err() != nil || errors.Is(err, rpctypes.ErrTimeout) || errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail) ||
		errors.Is(err, rpctypes.ErrTimeoutDueToConnectionLost)
}

// member returns the ID of the first member that match takes (by its
// peer URLs and ID), as a member's list (linearizable) says; err when the
// list could not be read.
func member(ctx context.Context, cli *clientv3.Client, match func(peers []string, id uint64) bool) (id uint64, ok bool, err error) {
	lctx, cancel := context.WithTimeout(ctx, reconfigTimeout)
	defer cancel()
	r, err := cli.MemberList(lctx)
	if err != nil {
		return 0, false, err
	}
	for _, m := range r.Members {
		if match(m.PeerURLs, m.ID) {
			return m.ID, true, nil
		}
	}
	return 0, false, nil
}

// addable checks that member i is removed and that no member of the
// cluster is paused, and returns it with the members up.
func (c *Cluster) addable(i int) (*Member, []int, error) {
	m, unlock, err := c.faultMember(i)
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	if !m.isRemoved() {
		return nil, nil, fmt.Errorf("cluster: member %s is in the cluster", m.Name)
	}
	var up []int
	for _, o := range c.inCluster() {
		if c.Paused(o.Index) {
			return nil, nil, fmt.Errorf("cluster: member %s is paused: resume it before adding %s", o.Name, m.Name)
		}
		if o.running() {
			up = append(up, o.Index)
		}
	}
	if len(up) == 0 {
		return nil, nil, fmt.Errorf("cluster: no member is up to add %s", m.Name)
	}
	return m, up, nil
}

// waitApplied waits until every member of ms that is up has applied index
// idx.
func (c *Cluster) waitApplied(ctx context.Context, ms []int, idx uint64) error {
	t := time.NewTicker(c.pollEvery())
	defer t.Stop()
	for {
		var behind []string
		for _, j := range ms {
			o := c.members[j]
			if !o.running() {
				continue
			}
			if _, applied, err := o.server().indexes(ctx); err != nil || applied < idx {
				behind = append(behind, o.Name)
			}
		}
		if len(behind) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not apply index %d: %w", strings.Join(behind, ", "), idx, ctx.Err())
		case <-t.C:
		}
	}
}

// rejoin starts m, just added to the cluster, with empty data, and applies
// the cuts in force that involve it.
func (c *Cluster) rejoin(m *Member, id uint64) (server, error) {
	unlock, err := c.Fault()
	if err != nil {
		return nil, err
	}
	defer unlock()
	// etcd checks the initial cluster against the cluster's member list:
	// it names the members in the cluster now.
	var initial []string
	for _, o := range c.members {
		if o == m || !o.isRemoved() {
			initial = append(initial, o.Name+"="+o.PeerURL)
		}
	}
	s, err := c.startServer(m, strings.Join(initial, ","), embed.ClusterStateFlagExisting)
	if err != nil {
		return nil, err
	}
	m.setServer(s)
	m.mu.Lock()
	m.removed, m.ID = false, id
	m.mu.Unlock()
	for p := range c.cuts {
		if p[0] == m.Index || p[1] == m.Index {
			c.setPeer(p[0], p[1], true)
			c.setPeer(p[1], p[0], true)
		}
	}
	return s, nil
}

// untilHealthy makes a membership change, asking again while etcd refuses
// it as unhealthy (see above), until ctx ends. Each request has a context
// of its own, which ctx's end does not cancel.
func untilHealthy(ctx context.Context, change func(context.Context) error) error {
	t := time.NewTicker(reconfigRetry)
	defer t.Stop()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reconfigTimeout)
		err := change(rctx)
		cancel()
		if !errors.Is(err, rpctypes.ErrUnhealthy) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", err, ctx.Err())
		case <-t.C:
		}
	}
}
