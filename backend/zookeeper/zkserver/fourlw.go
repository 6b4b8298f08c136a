package zkserver

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// fourLetter sends a four-letter word (srvr, mntr, ruok, stat, ...) to the
// client port at addr and returns the whole answer. The word must be in the
// server's 4lw.commands.whitelist.
func fourLetter(ctx context.Context, addr, word string) (string, error) {
	d := net.Dialer{Timeout: 500 * time.Millisecond}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	deadline := time.Now().Add(time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.SetDeadline(deadline)
	if _, err := io.WriteString(c, word); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// Status is a server's answer to srvr.
type Status struct {
	Version string
	Mode    string // ModeLeader, ModeFollower, ModeStandalone; "" when not serving
	Zxid    int64  // the last zxid the server has applied
	Nodes   int
}

// The modes a serving server answers srvr with.
const (
	ModeLeader     = "leader"
	ModeFollower   = "follower"
	ModeStandalone = "standalone"
)

// notServing is what a server that is not serving clients (looking for a
// leader, syncing with one) answers to every word but a few.
const notServing = "This ZooKeeper instance is not currently serving requests"

// Srvr asks the server at addr for its status. A server that is up but not
// serving answers with Mode "".
func Srvr(ctx context.Context, addr string) (Status, error) {
	out, err := fourLetter(ctx, addr, "srvr")
	if err != nil {
		return Status{}, err
	}
	var st Status
	if strings.HasPrefix(out, notServing) {
		return st, nil
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ": ")
		if !ok {
			continue
		}
		switch k {
		case "Zookeeper version":
			// Debian's build says "3.8.0-${mvngit.commit.id}, built on ...".
			st.Version, _, _ = strings.Cut(v, ",")
			st.Version, _, _ = strings.Cut(st.Version, "-")
		case "Mode":
			st.Mode = v
		case "Zxid":
			st.Zxid, err = strconv.ParseInt(v, 0, 64)
		case "Node count":
			st.Nodes, err = strconv.Atoi(v)
		}
		if err != nil {
			return st, fmt.Errorf("srvr from %s: %q: %v", addr, sc.Text(), err)
		}
	}
	if st.Mode == "" {
		return st, fmt.Errorf("srvr from %s: no mode in %q", addr, out)
	}
	return st, nil
}

// Watched tells whether a session connected to the server at addr
// watches path: the server's own list of watches by path (wchp), in which
// each path is a line and the sessions watching it follow, indented.
func Watched(ctx context.Context, addr, path string) (bool, error) {
	out, err := fourLetter(ctx, addr, "wchp")
	if err != nil {
		return false, err
	}
	if strings.HasPrefix(out, notServing) {
		return false, nil
	}
	for _, line := range strings.Split(out, "\n") {
		if line == path {
			return true, nil
		}
	}
	return false, nil
}
