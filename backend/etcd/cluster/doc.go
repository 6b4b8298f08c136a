// Package cluster runs the etcd servers of locktest's etcd backend: a real
// etcd cluster whose members run inside the current process
// (go.etcd.io/etcd/server/v3/embed) or as OS processes of any etcd 3.4 or
// later (process.go), with every client link behind toxiproxy, for
// Jepsen-style tests of locks built on etcd. A *Cluster offers every
// capability of package system an etcd cluster can (system.go).
//
// Everything listens on 127.0.0.1 only. Each workload client gets its own
// proxy to every member, named "<client>-><member>" (e.g. "c1->m0"), so a
// nemesis can cut or slow one client's view of one member without touching
// the others. Proxies and toxics are driven only through toxiproxy's HTTP API
// with its own client package (github.com/Shopify/toxiproxy/v2/client), so
// the same nemesis code can drive a remote toxiproxy-server. Peer (raft)
// traffic between members is not under toxiproxy; each member's advertised
// peer URL is a plain in-process TCP relay, only so that Close can cut every
// peer connection at once.
//
// A running cluster that someone else started is a system too: Connect
// returns an *External (external.go), which reaches the members only
// through their client URLs (over TLS when they serve it), puts the client
// links behind an in-process or a remote toxiproxy-server, keeps every key
// it writes under a prefix and deletes them at Close. It offers no member
// faults.
//
// Typical use:
//
//	c, err := cluster.Start(ctx, cluster.Config{Dir: runDir, LogDir: logDir})
//	if err != nil { ... }
//	defer c.Close()
//
//	cli, err := c.Client("c1")           // clientv3 over c1's proxies
//	...
//	link, err := c.Link("c1", 0)         // proxy "c1->m0"
//	link.AddToxic("blackhole", "timeout", "downstream", 1,
//		toxiclient.Attributes{"timeout": 0}) // c1 can no longer hear m0
//	c.ClearToxics()                      // heals; open connections are cut
//	link.Disable()                       // connection refused until Enable
//
//	leader, err := c.Leader(ctx)         // index of the member all running members agree on
//	c.HardStopMember(leader)             // crash it (no leadership transfer)
//	c.RestartMember(ctx, leader)         // from its data dir; waits until caught up
//
// Member faults (faults.go): Partition/SetCuts/Heal cut raft traffic between
// members with EtcdServer.CutPeer/MendPeer on both sides of each link (a
// proxy in front of a peer port could not, since rafthttp streams are
// dialled by the receiving side); PauseMember/ResumeMember stop a member's
// raft transport (PauseSending) and hold its client links; HardStopMember
// and RestartMember crash and restart a member; Hashes compares the
// members' key-value stores at one revision; ClearToxics removes every
// toxic; AdminClient and DirectClient dial members directly. Membership
// changes (membership.go): RemoveMember takes a member out of the cluster
// and wipes its data, AddMember brings it back as a new member.
//
// Timing on a 2-CPU VM (3 members, TickMs 10, ElectionMs 100): Start to a
// ready cluster with an agreed leader takes ~70-90 ms; Close ~10 ms.
//
// Things to know:
//
//   - Logs. Each member logs (zap, JSON) to LogDir/etcd-<name>.log and
//     toxiproxy (zerolog) to LogDir/toxiproxy.log; nothing is written to the
//     terminal. etcd's global logger setup (embed.Config.SetupGlobalLoggers)
//     is never called, so grpclog and zap's globals are left alone.
//   - Ports. etcd's ports are fixed before start, so they are picked at random
//     below the kernel's ephemeral port range (20000-32000 or up to its start)
//     and checked with bind+close; Start retries on fresh ports when a bind
//     still fails. Proxies and the toxiproxy API listen on 127.0.0.1:0.
//   - Close cuts all peer connections at the relays, hard-stops every member,
//     then closes them. A plain embed.Etcd.Close first tries to hand
//     leadership over, which takes ~5 s when all members go down together.
//     Without cutting the peer connections first, Close takes ~1 s (etcd's
//     peer HTTP server waits out its 1 s shutdown limit for keep-alive
//     connections it cannot abort), sometimes ~5 s (HardStop waits for the
//     leader's /version probe stuck on such a connection), and goroutines
//     linger for up to 5 s afterwards. See relay.
//   - Toxics: toxicity 0 means "never"; pass 1. Removing a timeout toxic
//     closes the connections that passed through it (clients reconnect).
//     A disabled proxy refuses connections; a timeout toxic makes them hang.
package cluster
