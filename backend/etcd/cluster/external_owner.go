package cluster

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locktest/locktest/internal/words"
)

// What a run against an external cluster would leave there if it were
// killed: the keys under its prefix (the lock keys are on leases that
// expire, the etcd-txn resource's values on none) and, on a
// toxiproxy-server of the team's, its proxies, still listening. So a run
// marks its prefix as a locktest run's, and says that it is alive:
//
//	<prefix>.locktest-run    its proxies' name prefix (External.token), on no lease
//	<prefix>.locktest-alive  on a lease it keeps alive (ownerTTL)
//
// Close deletes both with the rest of the prefix. A killed run leaves the
// first without the second once its lease has expired, and the next run
// that connects to the cluster deletes what it left: its prefix, beside the
// new run's own, and its proxies on the toxiproxy-server the new run uses.
// Keys no run marked (a run mark holds a token) are never touched.
const (
	runMark   = ".locktest-run"
	aliveMark = ".locktest-alive"
	// ownerTTL is the alive mark's lease TTL in seconds: a run is taken for
	// dead this long after it stopped renewing. Renewals go directly to
	// the members, never through the faults' links.
	ownerTTL = 5
)

// tokenName is what External.token looks like.
var tokenName = regexp.MustCompile(`^locktest-[0-9a-f]{6}-$`)

// markOwner writes this run's marks under its prefix and keeps the alive
// mark's lease alive until Close (e.stopOwner).
func (e *External) markOwner(ctx context.Context, admin *clientv3.Client) error {
	lease, err := admin.Grant(ctx, ownerTTL)
	if err != nil {
		return fmt.Errorf("cluster: marking prefix %s: %v", e.cfg.Prefix, err)
	}
	kctx, stop := context.WithCancel(context.Background())
	alive, err := admin.KeepAlive(kctx, lease.ID)
	if err != nil {
		stop()
		return fmt.Errorf("cluster: marking prefix %s: %v", e.cfg.Prefix, err)
	}
	e.stopOwner = stop
	go func() {
		for range alive { // the renewals' answers, until stopOwner
		}
	}()
	run, live := e.cfg.Prefix+runMark, e.cfg.Prefix+aliveMark
	resp, err := admin.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(run), "=", 0)).
		Then(clientv3.OpPut(run, e.token), clientv3.OpPut(live, e.token, clientv3.WithLease(lease.ID))).Commit()
	switch {
	case err != nil:
		return fmt.Errorf("cluster: marking prefix %s: %v", e.cfg.Prefix, err)
	case !resp.Succeeded:
		return fmt.Errorf("cluster: prefix %s is another run's (%s exists)", e.cfg.Prefix, run)
	}
	return nil
}

// Leftovers says in one line what Connect removed that killed runs had left
// on the cluster and its toxiproxy-server, "" for nothing.
func (e *External) Leftovers() string { return e.leftovers }

// sweepDead deletes what killed runs left beside this run's prefix: each
// prefix marked as a run's whose alive mark is gone, and that run's proxies
// on e.links' toxiproxy-server when it is not in this process. It returns
// a line saying what it removed, "" for nothing.
func (e *External) sweepDead(ctx context.Context, admin *clientv3.Client) (string, error) {
	parent := path.Dir(strings.TrimSuffix(e.cfg.Prefix, "/")) + "/"
	resp, err := admin.Get(ctx, parent, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return "", fmt.Errorf("cluster: reading %s: %v", parent, err)
	}
	// A run's prefix is parent + name + "/", as this run's is.
	marked, alive := map[string]bool{}, map[string]bool{}
	for _, kv := range resp.Kvs {
		rest := strings.TrimPrefix(string(kv.Key), parent)
		name, mark, ok := strings.Cut(rest, "/")
		if !ok || name == "" {
			continue
		}
		switch mark {
		case runMark:
			marked[parent+name+"/"] = true
		case aliveMark:
			alive[parent+name+"/"] = true
		}
	}
	var dead, tokens []string
	for _, p := range slices.Sorted(func(yield func(string) bool) {
		for p := range marked {
			if !alive[p] && p != e.cfg.Prefix && !yield(p) {
				return
			}
		}
	}) {
		tok, err := admin.Get(ctx, p+runMark)
		if err != nil || len(tok.Kvs) != 1 || !tokenName.Match(tok.Kvs[0].Value) {
			continue
		}
		// Only if it is still dead and still the same run's.
		run := clientv3.Compare(clientv3.Value(p+runMark), "=", string(tok.Kvs[0].Value))
		gone := clientv3.Compare(clientv3.CreateRevision(p+aliveMark), "=", 0)
		del, err := admin.Txn(ctx).If(run, gone).Then(clientv3.OpDelete(p, clientv3.WithPrefix())).Commit()
		if err != nil {
			return "", fmt.Errorf("cluster: deleting what a killed run left under %s: %v", p, err)
		}
		if del.Succeeded {
			dead, tokens = append(dead, p), append(tokens, string(tok.Kvs[0].Value))
		}
	}
	proxies := 0
	if e.links != e.Proxies && len(tokens) > 0 { // a toxiproxy-server of the team's
		ps, err := e.links.API().Proxies()
		if err != nil {
			return "", fmt.Errorf("cluster: listing the proxies of %s: %v", e.links.Addr(), err)
		}
		for name, p := range ps {
			if slices.ContainsFunc(tokens, func(t string) bool { return strings.HasPrefix(name, t) }) {
				if err := p.Delete(); err != nil {
					return "", fmt.Errorf("cluster: deleting proxy %s of a killed run: %v", name, err)
				}
				proxies++
			}
		}
	}
	if len(dead) == 0 {
		return "", nil
	}
	line := fmt.Sprintf("removed what %s left on the cluster: the keys under %s", words.Count(len(dead), "killed run", "killed runs"), strings.Join(dead, ", "))
	if proxies > 0 {
		line += fmt.Sprintf(", and %s on toxiproxy %s", words.Count(proxies, "proxy", "proxies"), e.links.Addr())
	}
	return line, nil
}
