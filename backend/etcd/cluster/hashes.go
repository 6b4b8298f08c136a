package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locktest/locktest/checker"
)

// Consistent reports whether every hash is of the same revision and equal.
func Consistent(hs []checker.MemberHash) bool {
	if len(hs) == 0 {
		return false
	}
	for _, h := range hs[1:] {
		if h.Revision != hs[0].Revision || h.Hash != hs[0].Hash {
			return false
		}
	}
	return true
}

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
