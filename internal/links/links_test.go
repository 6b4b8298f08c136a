package links

import (
	"net"
	"slices"
	"testing"

	"github.com/locktest/locktest/internal/ports"

	"github.com/rs/zerolog"
	zlog "github.com/rs/zerolog/log"
)

// Toxiproxy's bandwidth toxic logs to zerolog's global logger, not the
// server's: once a run's toxiproxy starts, that logger writes nothing (by
// default it writes to the user's terminal).
func TestGlobalLoggerQuiet(t *testing.T) {
	l, err := Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if lvl := zlog.Logger.GetLevel(); lvl != zerolog.Disabled {
		t.Errorf("zerolog's global logger logs at %v", lvl)
	}
}

// A port bound by someone else after ports.Reserve checked it (another
// process's server, between the check and the proxy's listen) is given
// back, and the proxy listens on the next one.
func TestProxyOnATakenPortTriesAnother(t *testing.T) {
	taken, err := net.Listen("tcp", net.JoinHostPort(ports.Host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	takenPort := taken.Addr().(*net.TCPAddr).Port
	handed := 0
	reserve = func(n int) ([]int, error) {
		handed++
		if handed == 1 {
			return []int{takenPort}, nil
		}
		return ports.Reserve(n)
	}
	defer func() { reserve = ports.Reserve }()

	l, err := Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr, err := l.Proxy("c1-m0", "127.0.0.1:1")
	if err != nil {
		t.Fatalf("Proxy: %v", err)
	}
	if handed != 2 || addr == taken.Addr().String() {
		t.Errorf("proxy at %s after %d ports; the first, %d, was taken", addr, handed, takenPort)
	}
	if slices.Contains(l.ports, takenPort) {
		t.Errorf("the taken port %d is still counted as the links'", takenPort)
	}
}
