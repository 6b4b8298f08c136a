package cluster

import (
	"strings"
	"testing"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locktest/locktest/internal/links"
	"github.com/locktest/locktest/internal/polltest"
)

// TestExternalSweepsKilledRuns: a run against a team's cluster that dies
// without Close (its renewals stop, as when it is killed) leaves its keys
// and its proxies on the team's toxiproxy-server; the next run to connect
// removes them, and says so, and touches nothing else: not a live run's,
// not keys no run marked.
func TestExternalSweepsKilledRuns(t *testing.T) {
	t.Parallel()
	c, ctx := startProcesses(t, Config{})
	remote, err := links.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	api := toxiclient.NewClient(remote.Addr())
	cfg := func(prefix string) ExternalConfig {
		return ExternalConfig{Endpoints: endpointsOf(c), Toxiproxy: "http://" + remote.Addr(), Prefix: prefix}
	}
	admin, err := c.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	// Keys no run of ours marked, one under a name that looks like a mark.
	for _, k := range []string{"/locktest/theirs/" + runMark, "/locktest/theirs/x"} {
		if _, err := admin.Put(ctx, k, "not a run of ours"); err != nil {
			t.Fatal(err)
		}
	}

	killed := connect(t, ctx, cfg("/locktest/killed/"))
	if _, err := killed.Endpoints("c0"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Put(ctx, "/locktest/killed/values/lock", "7"); err != nil { // as etcd-txn's, on no lease
		t.Fatal(err)
	}
	live := connect(t, ctx, cfg("/locktest/live/"))
	if _, err := live.Endpoints("c0"); err != nil {
		t.Fatal(err)
	}
	// The killed run stops renewing; its alive mark goes with its lease.
	killed.stopOwner()
	polltest.Until(t, 3*ownerTTL*time.Second, "the killed run's alive mark to expire", func() bool {
		r, err := admin.Get(ctx, "/locktest/killed/"+aliveMark)
		return err == nil && len(r.Kvs) == 0
	})

	next := connect(t, ctx, cfg("/locktest/next/"))
	want := "removed what 1 killed run left on the cluster: the keys under /locktest/killed/, and 3 proxies on toxiproxy " + remote.Addr()
	if got := next.Leftovers(); got != want {
		t.Errorf("Leftovers = %q, want %q", got, want)
	}
	count := func(prefix string) int64 {
		r, err := admin.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return r.Count
	}
	if n := count("/locktest/killed/"); n != 0 {
		t.Errorf("%d keys left under the killed run's prefix", n)
	}
	if count("/locktest/theirs/") != 2 || count("/locktest/live/") != 2 || count("/locktest/next/") != 2 {
		t.Errorf("keys under theirs, live, next: %d, %d, %d; want 2, 2 (its marks), 2",
			count("/locktest/theirs/"), count("/locktest/live/"), count("/locktest/next/"))
	}
	proxies, err := api.Proxies()
	if err != nil {
		t.Fatal(err)
	}
	for name := range proxies {
		if strings.HasPrefix(name, killed.token) {
			t.Errorf("the killed run's proxy %s is still on the toxiproxy", name)
		}
	}
	if len(proxies) != 3 {
		t.Errorf("the toxiproxy holds %d proxies, want the live run's 3", len(proxies))
	}

	// A live run's Close deletes its marks with the rest.
	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	if n := count("/locktest/live/"); n != 0 {
		t.Errorf("%d keys left under a closed run's prefix", n)
	}
}
