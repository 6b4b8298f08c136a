package proc

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
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

// socketInode finds the inode of the TCP socket local -> remote: asked of
// the kernel by its addresses (sock_diag), or, where that is not built in,
// read from /proc/net/tcp. Reading that file formats a line for every TCP
// socket of the host: on a busy machine (7,000 sockets) each lookup cost
// milliseconds of CPU, and a process cluster looks one up for every peer
// connection its relays accept.
func socketInode(local, remote string) (string, error) {
	inode, err := diagInode(local, remote)
	if errors.Is(err, errNoDiag) {
		return tcpFileInode(local, remote)
	}
	return inode, err
}

// tcpFileInode finds the inode of the TCP socket local -> remote in
// /proc/net/tcp.
func tcpFileInode(local, remote string) (string, error) {
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

// errNoDiag says that the kernel does not answer sock_diag requests.
var errNoDiag = errors.New("proc: no sock_diag")

// diagInode asks the kernel for the inode of the IPv4 TCP socket local ->
// remote by its addresses (NETLINK_SOCK_DIAG, one exact lookup; netlink's
// inet_diag_req_v2 and inet_diag_msg, linux/inet_diag.h).
func diagInode(local, remote string) (string, error) {
	l, err := netip.ParseAddrPort(local)
	if err != nil || !l.Addr().Is4() {
		return "", fmt.Errorf("proc: %q is not an IPv4 address and port", local)
	}
	r, err := netip.ParseAddrPort(remote)
	if err != nil || !r.Addr().Is4() {
		return "", fmt.Errorf("proc: %q is not an IPv4 address and port", remote)
	}
	const (
		sockDiagByFamily = 20 // SOCK_DIAG_BY_FAMILY
		netlinkSockDiag  = 4  // NETLINK_SOCK_DIAG
		hdrLen           = 16 // struct nlmsghdr
		reqLen           = 56 // struct inet_diag_req_v2
		inodeAt          = 68 // idiag_inode in struct inet_diag_msg
	)
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, netlinkSockDiag)
	if err != nil {
		return "", fmt.Errorf("%w: %v", errNoDiag, err)
	}
	defer syscall.Close(fd)
	req := make([]byte, hdrLen+reqLen)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], sockDiagByFamily)
	ne.PutUint16(req[6:], syscall.NLM_F_REQUEST)
	d := req[hdrLen:]
	d[0], d[1] = syscall.AF_INET, syscall.IPPROTO_TCP
	ne.PutUint32(d[4:], 0xffffffff) // every state
	id := d[8:]                     // struct inet_diag_sockid: ports and addresses in network order
	binary.BigEndian.PutUint16(id[0:], l.Port())
	binary.BigEndian.PutUint16(id[2:], r.Port())
	la, ra := l.Addr().As4(), r.Addr().As4()
	copy(id[4:], la[:])
	copy(id[20:], ra[:])
	ne.PutUint32(id[40:], 0xffffffff) // INET_DIAG_NOCOOKIE
	ne.PutUint32(id[44:], 0xffffffff)
	if err := syscall.Sendto(fd, req, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return "", fmt.Errorf("%w: %v", errNoDiag, err)
	}
	buf := make([]byte, 4096)
	n, _, err := syscall.Recvfrom(fd, buf, 0)
	if err != nil {
		return "", fmt.Errorf("%w: %v", errNoDiag, err)
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil || len(msgs) == 0 {
		return "", fmt.Errorf("%w: a reply that does not parse (%v)", errNoDiag, err)
	}
	switch m := msgs[0]; {
	case m.Header.Type == sockDiagByFamily && len(m.Data) >= inodeAt+4:
		return strconv.FormatUint(uint64(ne.Uint32(m.Data[inodeAt:])), 10), nil
	case m.Header.Type == syscall.NLMSG_ERROR && len(m.Data) >= 4 && syscall.Errno(-int32(ne.Uint32(m.Data))) == syscall.ENOENT:
		return "", fmt.Errorf("proc: no TCP socket %s -> %s", local, remote)
	default:
		return "", fmt.Errorf("%w: reply type %d", errNoDiag, m.Header.Type)
	}
}
