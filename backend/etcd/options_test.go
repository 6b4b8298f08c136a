package etcd

import (
	"slices"
	"strings"
	"testing"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/backend/etcd/cluster"
	"github.com/locktest/locktest/nemesis"
)

// etcd's options size the cluster and say which faults its system offers
// before anything starts: --nemesis all is every family for the members
// locktest runs, and the client families for an external cluster.
func TestOptionsPlan(t *testing.T) {
	t.Parallel()
	every := []string{"partition", "isolate", "lease", "clock", "pause", "crash", "slow", "member", "lost-reply"}
	for _, c := range []struct {
		o       Options
		members int
		want    int
		err     string
		all     []string
	}{
		{Options{}, 0, 3, "", every},
		{Options{Mode: Process}, 5, 5, "", every},
		{Options{}, 4, 0, "--members must be 3 or 5", nil},
		{Options{Mode: External, Endpoints: []string{"http://a:2379", "http://b:2379"}}, 0, 2, "",
			[]string{"isolate", "lease", "clock", "pause", "crash", "slow", "lost-reply"}},
		{Options{Mode: External, Endpoints: []string{"http://a:2379"}}, 3, 0, "--members does not apply", nil},
		{Options{Mode: External}, 0, 0, "needs --endpoints", nil},
		{Options{EtcdBin: "/bin/etcd"}, 0, 0, "--etcd-bin needs --cluster process", nil},
	} {
		p := backend.Plan{Recipe: "mutex", Members: c.members, Families: []string{nemesis.All}}
		names, err := c.o.Plan(p)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%+v, %d members: %v, want %q", c.o, c.members, err, c.err)
			}
			continue
		}
		if err != nil || len(names) != c.want {
			t.Errorf("%+v, %d members: %q, %v; want %d", c.o, c.members, names, err, c.want)
		}
		// The members a run's faults are drawn against: a cluster
		// locktest runs names them m0, m1, ...; an external one's own
		// names are known once it is reached.
		for i, name := range names {
			if want := cluster.MemberName(i); c.o.Mode == External && name != "" || c.o.Mode != External && name != want {
				t.Errorf("%+v: member %d planned as %q", c.o, i, name)
			}
		}
		if all := nemesis.Expand(p.Families, nemesis.Offered(c.o.Prototype(p))); !slices.Equal(all, c.all) {
			t.Errorf("%s: --nemesis all is %v, want %v", c.o.Mode, all, c.all)
		}
	}
}
