// Package ports hands out loopback ports for the servers a run starts
// (etcd members, toxiproxy proxies, Redis servers), below the kernel's
// ephemeral range, so that no outgoing connection takes one first.
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
// check each with a bind+close, and remember them process-wide so two
// clusters in one process never pick the same port. A bind race with another
// process is still possible; Start then tears down and retries with fresh
// ports.
const (
	portLow  = 20000
	portHigh = 32000
)

// Host is the only address anything locktest starts binds to.
const Host = "127.0.0.1"

var reserved = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

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
	reserved.Lock()
	defer reserved.Unlock()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			for _, p := range ports {
				delete(reserved.ports, p)
			}
			return nil, fmt.Errorf("no free ports in [%d,%d)", lo, hi)
		}
		p := lo + rand.IntN(hi-lo)
		if reserved.ports[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(Host, strconv.Itoa(p)))
		if err != nil {
			continue
		}
		l.Close()
		reserved.ports[p] = true
		ports = append(ports, p)
	}
	return ports, nil
}

func Release(ports []int) {
	reserved.Lock()
	defer reserved.Unlock()
	for _, p := range ports {
		delete(reserved.ports, p)
	}
}

// IsAddrInUse reports whether err is a bind failure worth retrying with
// other ports.
func IsAddrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || (err != nil && strings.Contains(err.Error(), "address already in use"))
}
