package zkserver

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Bypasses lists the established connections that a server process dialled
// straight to another server's real quorum or election port, past the
// relays: with relays, there must be none, or a Cut would not cut them.
func (e *Ensemble) Bypasses() ([]string, error) {
	type peerPort struct {
		sid  int
		kind portKind
	}
	real := map[int]peerPort{}
	for _, s := range e.servers {
		q, _ := strconv.Atoi(portOf(s.quorum))
		el, _ := strconv.Atoi(portOf(s.election))
		real[q], real[el] = peerPort{s.ID, quorumPort}, peerPort{s.ID, electionPort}
	}
	owner := map[string]int{} // socket inode -> sid
	for _, s := range e.servers {
		pid := s.Pid()
		if pid == 0 {
			continue
		}
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			return nil, err
		}
		for _, fd := range fds {
			l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
			if err == nil && strings.HasPrefix(l, "socket:[") {
				owner[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = s.ID
			}
		}
	}
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
		fld := strings.Fields(sc.Text())
		if len(fld) < 10 || fld[3] != "01" { // ESTABLISHED
			continue
		}
		sid, ok := owner[fld[9]]
		if !ok {
			continue
		}
		_, rport, _ := strings.Cut(fld[2], ":")
		port, _ := strconv.ParseInt(rport, 16, 32)
		if to, ok := real[int(port)]; ok && to.sid != sid {
			out = append(out, fmt.Sprintf("zk%d -> zk%d's %s port", sid, to.sid, to.kind))
		}
	}
	return out, sc.Err()
}

func portOf(hostport string) string {
	_, p, _ := strings.Cut(hostport, ":")
	return p
}
