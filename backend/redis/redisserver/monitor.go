package redisserver

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Command is a command a server took, as MONITOR tells it.
type Command struct {
	// At is the server's own clock when it took the command, before it
	// ran it and so before its reply: the host's clock, which the servers
	// share with locktest.
	At time.Time
	// Lua says a script ran it; else a client sent it.
	Lua  bool
	Args []string // the command's name first
}

// Gap is a span in which a server's commands may be missing from a Monitor
// stream: its connection broke (a crash, a restart) and came back.
type Gap struct{ From, To time.Time }

// Monitor streams the commands server i takes that have an argument under
// prefix, over a direct connection (MONITOR: no fault on a client's links
// touches it), from when it returns until ctx ends or the deployment
// closes. A broken connection is made again, and each span in which
// commands may be missing is sent on gaps (which must be read too).
func (d *Deployment) Monitor(ctx context.Context, i int, prefix string) (<-chan Command, <-chan Gap, error) {
	if i < 0 || i >= len(d.servers) {
		return nil, nil, fmt.Errorf("redisserver: no server %d", i)
	}
	s := d.servers[i]
	rd, err := d.monitor(ctx, s)
	if err != nil {
		return nil, nil, err
	}
	out, gaps := make(chan Command), make(chan Gap)
	go func() {
		defer close(out)
		defer close(gaps)
		for {
			err := readMonitor(ctx, rd, prefix, out)
			from := time.Now()
			for err != nil && ctx.Err() == nil && !d.Closed() {
				select {
				case <-time.After(100 * time.Millisecond):
				case <-ctx.Done():
				}
				rd, err = d.monitor(ctx, s)
			}
			if err != nil {
				return
			}
			select {
			case gaps <- Gap{From: from, To: time.Now()}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, gaps, nil
}

// monitor opens a MONITOR connection to s, closed when ctx ends or the
// deployment closes.
func (d *Deployment) monitor(ctx context.Context, s *Server) (*bufio.Reader, error) {
	var dialer net.Dialer
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn, err := dialer.DialContext(dctx, "tcp", s.Addr)
	if err != nil {
		return nil, fmt.Errorf("redisserver: monitoring %s: %w", s.Name, err)
	}
	if err := d.Track(conn); err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, func() { conn.Close() })
	rd := bufio.NewReader(conn)
	conn.SetDeadline(time.Now().Add(time.Second))
	_, err = conn.Write([]byte("MONITOR\r\n"))
	if err == nil {
		var line string
		if line, err = rd.ReadString('\n'); err == nil && line != "+OK\r\n" {
			err = fmt.Errorf("MONITOR answered %q", line)
		}
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("redisserver: monitoring %s: %w", s.Name, err)
	}
	conn.SetDeadline(time.Time{})
	return rd, nil
}

// readMonitor sends on out each command rd tells with an argument under
// prefix, until rd fails.
func readMonitor(ctx context.Context, rd *bufio.Reader, prefix string, out chan<- Command) error {
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return err
		}
		c, ok := parseMonitor(strings.TrimSuffix(line, "\r\n"))
		if !ok || !mentions(c.Args, prefix) {
			continue
		}
		select {
		case out <- c:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func mentions(args []string, prefix string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, prefix) {
			return true
		}
	}
	return false
}

// parseMonitor reads one line of MONITOR's output:
//
//	+1795772910.375870 [0 127.0.0.1:6379] "set" "k" "a\"b"
//
// (the arguments quoted as Redis's sdscatrepr quotes them).
func parseMonitor(line string) (Command, bool) {
	line, ok := strings.CutPrefix(line, "+")
	if !ok {
		return Command{}, false
	}
	ts, rest, ok := strings.Cut(line, " [")
	if !ok {
		return Command{}, false
	}
	secs, micros, ok := strings.Cut(ts, ".")
	sec, err1 := strconv.ParseInt(secs, 10, 64)
	usec, err2 := strconv.ParseInt(micros, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return Command{}, false
	}
	client, rest, ok := strings.Cut(rest, "] ")
	if !ok {
		return Command{}, false
	}
	c := Command{At: time.Unix(sec, usec*1000), Lua: strings.HasSuffix(client, " lua")}
	for rest != "" {
		arg, tail, ok := unquote(rest)
		if !ok {
			return Command{}, false
		}
		c.Args = append(c.Args, arg)
		rest = strings.TrimPrefix(tail, " ")
	}
	return c, len(c.Args) > 0
}

// unquote reads one quoted argument at the start of s, and returns it and
// what follows.
func unquote(s string) (arg, rest string, ok bool) {
	if !strings.HasPrefix(s, `"`) {
		return "", "", false
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), s[i+1:], true
		case '\\':
			if i+1 >= len(s) {
				return "", "", false
			}
			i++
			switch e := s[i]; e {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'x':
				if i+2 >= len(s) {
					return "", "", false
				}
				n, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
				if err != nil {
					return "", "", false
				}
				b.WriteByte(byte(n))
				i += 2
			default:
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", false
}
