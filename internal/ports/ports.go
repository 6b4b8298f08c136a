// Package ports hands out loopback ports for the servers a run starts
// (etcd members, toxiproxy proxies, Redis servers), below the kernel's
// ephemeral range, so that no outgoing connection takes one first, and
// claimed across processes, so that no other locktest process takes one
// while it is not bound (a proxy a fault disabled).
package ports

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// etcd needs its peer URLs (and we want its client URLs) fixed before any
// member starts, so the ports cannot come from binding ":0". Ports picked
// from the kernel's ephemeral range (e.g. by binding ":0" and closing) can be
// handed out again as the source port of some outgoing connection — in
// practice another member's peer dial — before etcd binds them, which fails
// the start with "address already in use". Ports below the ephemeral range
// are never used as source ports, so we pick random ports in
// [portLow, portHigh) (capped below the ephemeral range where it is known),
// check each with a bind+close, and claim them until Release: within the
// process in a map, across processes by an abstract unix socket named after
// the port (claim). A bind race with a process that is not locktest is still
// possible; Start then tears down and retries with fresh ports.
const (
	portLow  = 20000
	portHigh = 32000
)

// Host is the only address anything locktest starts binds to.
const Host = "127.0.0.1"

var reserved = struct {
	sync.Mutex
	ports map[int]net.Listener
}{ports: map[int]net.Listener{}}

// claim takes port p for this process against every other locktest
// process: a proxy that a partition disables leaves its port unbound for
// seconds, and another run's Reserve found it free and took it (a sweep
// beside the test suite: "enabling c2->m1: bind: address already in use",
// the run unknown). The claim is an abstract unix socket, which the kernel
// removes when the process exits, however it ends: nothing is left on disk.
func claim(p int) (net.Listener, error) {
	return net.Listen("unix", "@locktest-port-"+strconv.Itoa(p))
}

// portRange returns [lo, hi) to pick from, ending below the ephemeral range
// when /proc says where it starts.
var portRange = sync.OnceValues(func() (int, int) {
	lo, hi := portLow, portHigh
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if eph, err := strconv.Atoi(f[0]); err == nil && eph < hi && eph-lo >= 2000 {
				hi = eph
			}
		}
	}
	return lo, hi
})

// Reserve returns n distinct free loopback ports and marks them
// reserved in this process until Release.
func Reserve(n int) ([]int, error) {
	lo, hi := portRange()
	return reserveIn(lo, hi, n)
}

func reserveIn(lo, hi, n int) ([]int, error) {
	reserved.Lock()
	defer reserved.Unlock()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			release(ports)
			return nil, fmt.Errorf("no free ports in [%d,%d)", lo, hi)
		}
		p := lo + rand.IntN(hi-lo)
		if _, ok := reserved.ports[p]; ok {
			continue
		}
		c, err := claim(p)
		if err != nil {
			continue // another locktest process holds it
		}
		l, err := net.Listen("tcp", net.JoinHostPort(Host, strconv.Itoa(p)))
		if err != nil {
			c.Close()
			continue
		}
		l.Close()
		reserved.ports[p] = c
		ports = append(ports, p)
	}
	return ports, nil
}

// Release gives the ports back, to this process and to others.
func Release(ports []int) {
	reserved.Lock()
	defer reserved.Unlock()
	release(ports)
}

func release(ports []int) {
	for _, p := range ports {
		if c, ok := reserved.ports[p]; ok {
			c.Close()
			delete(reserved.ports, p)
		}
	}
}

// IsAddrInUse reports whether err is a bind failure worth retrying with
// other ports.
func IsAddrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || (err != nil && strings.Contains(err.Error(), "address already in use"))
}
