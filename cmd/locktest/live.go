package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/report"
)

// liveFlags are run's --live and --live-addr (scenario run's too).
type liveFlags struct {
	on   *bool
	addr *string
}

func addLiveFlags(fs *flag.FlagSet) *liveFlags {
	return &liveFlags{
		on: fs.Bool("live", false, "serve a page that draws the run as it goes (read from its history as written) and turns into its report at the end; "+
			"the report stays served until Ctrl-C (locktest serve DIR follows a run started elsewhere: RUNDIR/live.html)"),
		addr: fs.String("live-addr", "127.0.0.1:8080", "address of --live's page, on loopback (locktest serve --public serves beyond)"),
	}
}

// errBeyond refuses an address beyond loopback that was not asked for.
var errBeyond = errors.New("listens beyond loopback")

// listen listens on addr, which must be on loopback unless public.
func listen(addr string, public bool) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); !public && (host == "" || ip == nil && host != "localhost" || ip != nil && !ip.IsLoopback()) {
		return nil, fmt.Errorf("%s %w", addr, errBeyond)
	}
	return net.Listen("tcp", addr)
}

// runsServer serves the runs under root read-only (nothing outside root),
// each run's live page with them: serve's server and --live's.
func runsServer(root *os.Root, bs *backend.Set) *http.Server {
	return &http.Server{Handler: readOnly(report.Live(root, http.FileServerFS(inside{root.FS()}), bs)), ReadHeaderTimeout: 10 * time.Second}
}

// live is a run's live page, being served.
type live struct {
	ln   net.Listener
	url  string
	stop func()
	// backends judge the histories its page draws: its run's.
	backends *backend.Set
}

// startLive listens for a run's live page before the run starts (a
// taken or public address is an error before anything has started).
func startLive(f *liveFlags, bs *backend.Set) (*live, error) {
	if f == nil || !*f.on {
		return nil, nil
	}
	ln, err := listen(*f.addr, false)
	if err != nil {
		if errors.Is(err, errBeyond) {
			return nil, fmt.Errorf("--live-addr %w (locktest serve --public serves beyond)", err)
		}
		return nil, fmt.Errorf("--live-addr: %w", err)
	}
	return &live{ln: ln, backends: bs}, nil
}

// serve serves the runs under out, and says where the run dir's page is.
func (l *live) serve(w io.Writer, out, dir string) error {
	root, err := os.OpenRoot(out)
	if err != nil {
		l.ln.Close()
		return err
	}
	rel, err := filepath.Rel(out, dir)
	if err != nil {
		root.Close()
		l.ln.Close()
		return err
	}
	srv := runsServer(root, l.backends)
	go srv.Serve(l.ln)
	l.stop = func() { srv.Close(); root.Close() }
	l.url = fmt.Sprintf("http://%s/%s/", l.ln.Addr(), filepath.ToSlash(rel))
	fmt.Fprintf(w, "live: %slive.html\n", l.url)
	return nil
}

// close stops serving at once.
func (l *live) close() {
	if l != nil && l.stop != nil {
		l.stop()
	}
}

// keep serves the finished run's report until Ctrl-C.
func (l *live) keep(w io.Writer) {
	if l == nil || l.stop == nil {
		return
	}
	fmt.Fprintf(w, "live: the run ended; its report is served at %sreport.html until Ctrl-C\n", l.url)
	ctx, stop := signalContext()
	defer stop()
	<-ctx.Done()
	l.close()
}
