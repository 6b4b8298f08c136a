package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"time"

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

// liveServer serves the runs under root read-only, each run's live page
// with them, on ln, until stopped.
func liveServer(ln net.Listener, root *os.Root) (stop func()) {
	srv := &http.Server{Handler: readOnly(withLive(root, http.FileServerFS(inside{root.FS()}))), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return func() { srv.Close() }
}

// withLive serves, beside files, the live page of each run directory under
// root: DIR/live.html and what it asks for, DIR/live.json, drawn from
// DIR/history.jsonl as it stands; once DIR/report.html exists, live.html
// leads there.
func withLive(root *os.Root, files http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dir, file := path.Split(path.Clean("/" + r.URL.Path))
		if file != "live.html" && file != "live.json" {
			files.ServeHTTP(w, r)
			return
		}
		dir = path.Clean("." + dir)
		f, err := root.Open(path.Join(dir, "history.jsonl"))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		title := path.Base(dir)
		if dir == "." {
			title = filepath.Base(root.Name())
		}
		_, err = root.Stat(path.Join(dir, "report.html"))
		done := err == nil
		var buf bytes.Buffer
		switch {
		case file == "live.html" && done:
			http.Redirect(w, r, "report.html", http.StatusFound)
			return
		case file == "live.html":
			err = report.WriteLive(&buf, f, "history.jsonl", title)
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
		default:
			var b []byte
			b, err = report.LiveJSON(f, "history.jsonl", title, done)
			buf.Write(b)
			w.Header().Set("Content-Type", "application/json")
		}
		if err != nil {
			http.Error(w, oneLine(err), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		w.Write(buf.Bytes())
	})
}

// live is a run's live page, being served.
type live struct {
	ln   net.Listener
	url  string
	stop func()
}

// startLive listens for a run's live page before the run starts (a
// taken or public address is an error before anything has started).
func startLive(f *liveFlags) (*live, error) {
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
	return &live{ln: ln}, nil
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
	stop := liveServer(l.ln, root)
	l.stop = func() { stop(); root.Close() }
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
