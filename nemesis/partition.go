package nemesis

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/locktest/locktest/system"
)

// Partition faults: cut member links with the system's Partitioner, both
// ways; each client is placed on a side and loses its links to the
// members it does not reach.
const (
	PartitionOne            = "partition-one"             // one member against the rest
	PartitionLeader         = "partition-leader"          // the leader against the rest
	PartitionMajority       = "partition-majority"        // a random minority against the majority
	PartitionMajoritiesRing = "partition-majorities-ring" // each member sees its nearest neighbours (5+ members)
	PartitionBridge         = "partition-bridge"          // two sides joined by one member (5+ members)
)

type partition struct{}

// Spec says what the family is, as data.
func (partition) Spec() Spec {
	cut := []system.Capability{system.CapPartition, system.CapLinks}
	return Spec{
		Name: "partition",
		Doc:  "Cuts member pairs, both ways (embedded: etcd's own `CutPeer`/`MendPeer` on both sides; processes: the peer connections themselves): `one` member, the `leader`, a random `majority`, and with 5 members `majorities-ring` and `bridge`; each client is placed on a side and loses its links to the other.",
		Kinds: []Kind{
			{Name: PartitionOne, Needs: cut, Says: says("was isolated")},
			{Name: PartitionLeader, Needs: append(cut, system.CapLeader), Says: func(ts []string, _ map[string]string) string {
				return "the leader " + targets(ts) + " was partitioned away"
			}},
			{Name: PartitionMajority, Needs: cut, Says: says("was isolated")},
			// The ring and the bridge need five or more members.
			{Name: PartitionMajoritiesRing, Needs: cut, Members: 5, Says: active(PartitionMajoritiesRing)},
			{Name: PartitionBridge, Needs: cut, Members: 5, Says: active(PartitionBridge)},
		},
		Durations: fixed(2*time.Second, 4*time.Second),
		// Check asks each kind for its target or its groups.
		Untargeted: true,
	}
}

// active is Kind.Says for a kind without words of its own.
func active(kind string) func([]string, map[string]string) string {
	return func(ts []string, _ map[string]string) string {
		return "fault " + kind + " on " + targets(ts) + " was active"
	}
}

func (partition) Draw(g *Gen, e *Entry, d Range) {
	n := g.cfg.Members
	switch e.Fault {
	case PartitionOne:
		e.Target = g.member()
		e.Duration = g.dur(d)
		e.Sides = g.sides(2)
	case PartitionLeader:
		e.Target, e.Fallback = TargetLeader, g.member()
		e.Duration = g.dur(d)
		e.Sides = g.sides(2)
	case PartitionMajority:
		p := g.rng.Perm(n)
		e.Groups = [][]int{sorted(p[:n/2]), sorted(p[n/2:])}
		e.Duration = g.dur(d)
		e.Sides = g.sides(2)
	case PartitionMajoritiesRing:
		e.Groups = [][]int{g.rng.Perm(n)}
		e.Duration = g.dur(d)
		e.Sides = g.sides(n)
	case PartitionBridge:
		p := g.rng.Perm(n)
		h := (n - 1) / 2
		e.Groups = [][]int{sorted(p[:h]), {p[h]}, sorted(p[h+1:])}
		e.Duration = g.dur(d)
		e.Sides = g.sides(3)
	}
	e.Params["links"] = []string{"refuse", "drop"}[g.rng.IntN(2)]
}

func (partition) Check(e Entry, n int) error {
	switch e.Fault {
	case PartitionMajority:
		if len(e.Groups) != 2 {
			return errors.New("want 2 groups")
		}
	case PartitionBridge:
		if len(e.Groups) != 3 || len(e.Groups[1]) != 1 {
			return errors.New("want 3 groups, the middle one a single member")
		}
	case PartitionMajoritiesRing:
		if len(e.Groups) != 1 || len(e.Groups[0]) != n {
			return errors.New("want one group holding every member in ring order")
		}
	default:
		return needTarget(e)
	}
	return nil
}

// Inject cuts members apart and each client's links to the members its
// side does not reach: with param links=drop by a timeout toxic (data is
// dropped, connections hang: the client's requests routed there time out),
// otherwise (links=refuse) by disabling the proxies (connections are closed
// and refused, so the client's balancer routes to the members it reaches).
func (partition) Inject(ctx context.Context, env *Env, e Entry) (*Injected, error) {
	inj := &Injected{Params: map[string]string{}}
	cutter, err := need[partitioner](env)
	if err != nil {
		return inj, err
	}
	names := env.Sys.MemberNames()
	n := len(names)
	groups := e.Groups
	switch e.Fault {
	case PartitionOne, PartitionLeader:
		i, err := env.memberIndex(ctx, e, inj.Params)
		if err != nil {
			return inj, err
		}
		rest := []int{}
		for j := range n {
			if j != i {
				rest = append(rest, j)
			}
		}
		groups = [][]int{{i}, rest}
	}
	reach := Reach(e.Fault, groups, n)
	var pairs [][2]int
	for x := range n {
		for y := x + 1; y < n; y++ {
			if !reach[x][y] {
				pairs = append(pairs, [2]int{x, y})
			}
		}
	}
	// Targets: the isolated member or minority; for ring and bridge, all.
	switch e.Fault {
	case PartitionMajoritiesRing, PartitionBridge:
		inj.Targets = append(inj.Targets, names...)
	default:
		for _, i := range groups[0] {
			inj.Targets = append(inj.Targets, names[i])
		}
	}
	inj.Params["groups"] = formatGroups(e.Fault, groups, names)

	var ts toxics
	inj.Stop = func(context.Context) error { return errors.Join(cutter.SetCuts(nil), ts.remove()) }
	if err := cutter.SetCuts(pairs); err != nil {
		return inj, err
	}
	if env.Clients == nil {
		return inj, nil
	}
	links, err := need[linker](env)
	if err != nil {
		return inj, err
	}
	var place []string
	for _, name := range env.Clients.Names() {
		side, ok := e.Sides[name]
		if !ok {
			side = len(groups) - 1 // unplaced clients join the last (majority) group
			if e.Fault == PartitionMajoritiesRing {
				side = 0
			}
		}
		var home int
		if e.Fault == PartitionMajoritiesRing {
			home = groups[0][side%n]
		} else {
			home = groups[min(side, len(groups)-1)][0]
		}
		ps, err := links.Links(name)
		if err != nil {
			return inj, err
		}
		var sees []string
		for j := range n {
			if reach[home][j] {
				sees = append(sees, names[j])
				continue
			}
			if e.Params["links"] == "drop" {
				err = ts.cut(ps[j], "partition")
			} else {
				err = ts.disable(ps[j])
			}
			if err != nil {
				return inj, err
			}
		}
		place = append(place, name+":"+strings.Join(sees, "+"))
	}
	inj.Params["clients"] = strings.Join(place, " ")
	return inj, nil
}

func (partition) Heal(_ context.Context, env *Env) ([]string, error) {
	if cutter, ok := env.Sys.(partitioner); ok {
		return nil, cutter.SetCuts(nil)
	}
	return nil, nil
}

// Reach returns which members reach which under a partition fault with the
// given groups (see Entry.Groups; for partition-one and partition-leader
// [[isolated], rest]).
func Reach(fault string, groups [][]int, n int) [][]bool {
	reach := make([][]bool, n)
	for i := range reach {
		reach[i] = make([]bool, n)
		reach[i][i] = true
	}
	switch fault {
	case PartitionMajoritiesRing:
		pos := make([]int, n)
		for k, m := range groups[0] {
			pos[m] = k
		}
		// Each member sees the k nearest on either side: itself and 2k
		// others, at least a majority.
		k := (n/2 + 1) / 2
		for x := range n {
			for y := range n {
				d := pos[x] - pos[y]
				if d < 0 {
					d = -d
				}
				reach[x][y] = min(d, n-d) <= k
			}
		}
	default:
		group := make([]int, n)
		for i := range group {
			group[i] = -1 - i
		}
		for g, ms := range groups {
			for _, m := range ms {
				group[m] = g
			}
		}
		for x := range n {
			for y := range n {
				reach[x][y] = group[x] == group[y] ||
					fault == PartitionBridge && (group[x] == 1 || group[y] == 1)
			}
		}
	}
	return reach
}

func formatGroups(fault string, groups [][]int, names []string) string {
	var gs []string
	for _, g := range groups {
		var ns []string
		for _, i := range g {
			ns = append(ns, names[i])
		}
		gs = append(gs, strings.Join(ns, ","))
	}
	if fault == PartitionMajoritiesRing {
		return "ring:" + strings.Join(gs, "")
	}
	return strings.Join(gs, "|")
}
