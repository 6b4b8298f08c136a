package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locktest/locktest/backend/serverkit"
	"github.com/locktest/locktest/checker"
)

// Hashes waits until every member reports the same revision and then hashes
// each member's key-value store at that revision, asking each member
// directly. Members should be quiet (no writes): with writes going on they
// may never agree. If they do not agree before ctx ends, each member is
// hashed at the lowest revision any reported, and the error says so; a
// member that is down or cannot answer fails HashKV. Removed members
// (RemoveMember) are not in the cluster and not hashed.
func (c *Cluster) Hashes(ctx context.Context) ([]checker.MemberHash, error) {
	ms := c.inCluster()
	clis := make([]*clientv3.Client, len(ms))
	for i, m := range ms {
		if !m.running() {
			return nil, fmt.Errorf("%w: %s", ErrMemberDown, m.Name)
		}
		cl, err := c.DirectClient(m.Index)
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		clis[i] = cl
	}
	revs := make([]int64, len(ms))
	var agreeErr error
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		var errs []error
		for i, m := range ms {
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			st, err := clis[i].Status(sctx, m.ClientURL)
			cancel()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", m.Name, err))
				continue
			}
			revs[i] = st.Header.Revision
		}
		if len(errs) == 0 && slices.Min(revs) == slices.Max(revs) {
			break
		}
		select {
		case <-ctx.Done():
			if len(errs) > 0 {
				return nil, fmt.Errorf("cluster: HashKV: status: %w", errors.Join(errs...))
			}
			agreeErr = fmt.Errorf("cluster: HashKV: members did not reach the same revision (%v): %w", revs, ctx.Err())
		case <-t.C:
		}
		if agreeErr != nil {
			break
		}
	}
	rev := slices.Min(revs)
	hctx := ctx
	if agreeErr != nil {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
	}
	hs := make([]checker.MemberHash, len(ms))
	for i, m := range ms {
		r, err := clis[i].HashKV(hctx, m.ClientURL, rev)
		if err != nil {
			return nil, errors.Join(agreeErr, fmt.Errorf("cluster: HashKV of %s at %d: %w", m.Name, rev, err))
		}
		hs[i] = checker.MemberHash{Member: m.Name, Revision: rev, Hash: r.Hash}
	}
	return hs, agreeErr
}

// Hashes has every member hash its key-value store (maintenance HashKV) at
// one revision: the highest any member reported when asked, once every
// member has applied it. Unlike Cluster.Hashes it does not wait for the
// members to agree on their current revision, which other users of the
// cluster may keep moving.
func (e *External) Hashes(ctx context.Context) ([]checker.MemberHash, error) {
	sts, err := e.statuses(ctx)
	if err != nil {
		return nil, err
	}
	revs := make([]int64, len(sts))
	for i, st := range sts {
		revs[i] = st.Header.Revision
	}
	rev := slices.Max(revs)
	w := serverkit.Wait{Every: pollEvery, What: fmt.Sprintf("cluster: waiting for every member to reach revision %d", rev)}
	err = w.Until(ctx, func(ctx context.Context) error {
		if slices.Min(revs) >= rev {
			return nil
		}
		sts, err := e.statuses(ctx)
		if err != nil {
			return serverkit.Final(err)
		}
		for i, st := range sts {
			revs[i] = st.Header.Revision
		}
		if slices.Min(revs) < rev {
			return fmt.Errorf("at revisions %v", revs)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]checker.MemberHash, len(e.members))
	for i, m := range e.members {
		h, err := m.maint.HashKV(ctx, &pb.HashKVRequest{Revision: rev})
		if err != nil {
			return nil, fmt.Errorf("cluster: HashKV of %s at %d: %w", m.name, rev, err)
		}
		out[i] = checker.MemberHash{Member: m.name, Revision: rev, Hash: h.Hash}
	}
	return out, nil
}
