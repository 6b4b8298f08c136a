package proc

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// SocketOwner returns which of pids has a TCP socket whose local address is
// local and whose peer is remote, both IPv4 ("127.0.0.1:port"): for a
// connection accepted on loopback, local is the accepted connection's
// remote address and remote its local one. It reads /proc/net/tcp for the
// socket's inode and each process's open files for that inode.
func SocketOwner(local, remote string, pids []int) (int, error) {
	inode, err := socketInode(local, remote)
	if err != nil {
		return 0, err
	}
	want := "socket:[" + inode + "]"
	for _, pid := range pids {
		dir := "/proc/" + strconv.Itoa(pid) + "/fd"
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue // exited
		}
		for _, fd := range fds {
			if l, err := os.Readlink(dir + "/" + fd.Name()); err == nil && l == want {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("proc: no process among %v owns the socket %s -> %s", pids, local, remote)
}

// socketInode finds the inode of the TCP socket local -> remote.
func socketInode(local, remote string) (string, error) {
	l, err := hexAddr(local)
	if err != nil {
		return "", err
	}
	r, err := hexAddr(remote)
	if err != nil {
		return "", err
	}
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		fs := strings.Fields(sc.Text())
		if len(fs) > 9 && fs[1] == l && fs[2] == r {
			return fs[9], nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("proc: no TCP socket %s -> %s", local, remote)
}

// hexAddr writes an IPv4 address as /proc/net/tcp does: the address as a
// little-endian 32-bit number, then the port, both in upper-case hex.
func hexAddr(s string) (string, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil || !ap.Addr().Is4() {
		return "", fmt.Errorf("proc: %q is not an IPv4 address and port", s)
	}
	b := ap.Addr().As4()
	return fmt.Sprintf("%02X%02X%02X%02X:%04X", b[3], b[2], b[1], b[0], ap.Port()), nil
}
