package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/internal/words"
	"github.com/locktest/locktest/report"
)

// writeReport writes the report page beside a run's or a history's results,
// and says where; a report that cannot be drawn is a warning, not a failed
// run.
func writeReport(w io.Writer, out string, res *harness.Results) {
	if err := report.Write(out, res); err != nil {
		fmt.Fprintf(w, "report: not written: %s\n", words.OneLine(err))
		return
	}
	fmt.Fprintf(w, "report: %s\n", relPath(out))
}

// writeIndex writes the index page over the runs under dir.
func writeIndex(w io.Writer, dir string) {
	out, err := report.WriteIndex(dir)
	if err != nil {
		fmt.Fprintf(w, "index: not written: %s\n", words.OneLine(err))
		return
	}
	fmt.Fprintf(w, "index: %s\n", relPath(out))
}

func reportCmd(args []string, stdout io.Writer) (int, error) {
	fs := newFlags("report", "report DIR\n\nWrites DIR/index.html: one row per run directory under DIR (newest first, failures\nmarked), with each check's verdict, the exit status, the first story and a link to the\nrun's report.html.", stdout)
	if err := parseFlags(fs, args); err != nil {
		return exitUnknown, err
	}
	if fs.NArg() != 1 {
		return exitUnknown, fmt.Errorf("report: want exactly one DIR, got %d (see locktest report --help)", fs.NArg())
	}
	out, err := report.WriteIndex(fs.Arg(0))
	if err != nil {
		return exitUnknown, err
	}
	fmt.Fprintf(stdout, "index: %s\n", relPath(out))
	return exitValid, nil
}

func serveCmd(bs *backend.Set, args []string, stdout io.Writer) (int, error) {
	fs := newFlags("serve", "serve DIR [flags]\n\nServes DIR (its index.html and run directories) read-only over HTTP until interrupted:\nGET and HEAD only, and nothing outside DIR (a symbolic link that leads out of it is not found).\nRUNDIR/live.html draws a run as it goes, from its history as written (a run started\nelsewhere too), and turns into its report when the run has written it; /live.html lists\nthe runs in progress.", stdout)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on; a host other than loopback needs --public")
	public := fs.Bool("public", false, "allow --addr to listen beyond this machine's loopback")
	if err := parseFlags(fs, args); err != nil {
		return exitUnknown, err
	}
	if fs.NArg() != 1 {
		return exitUnknown, fmt.Errorf("serve: want exactly one DIR, got %d (see locktest serve --help)", fs.NArg())
	}
	dir := fs.Arg(0)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return exitUnknown, fmt.Errorf("serve: %s is not a directory", dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return exitUnknown, fmt.Errorf("serve: %w", err)
	}
	defer root.Close()
	ln, err := listen(*addr, *public)
	if errors.Is(err, errBeyond) {
		return exitUnknown, fmt.Errorf("--addr %w; add --public to mean it", err)
	}
	if err != nil {
		return exitUnknown, fmt.Errorf("serve: %w", err)
	}
	srv := runsServer(root, bs)
	ctx, stop := signalContext()
	defer stop()
	fmt.Fprintf(stdout, "serving %s at http://%s/ (Ctrl-C to stop)\n", dir, ln.Addr())
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return exitUnknown, err
	}
	return exitValid, nil
}

// readOnly refuses every method but GET and HEAD.
func readOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "read-only", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// inside is a directory's files as an os.Root opens them: a name that leads
// out of the directory (a symbolic link to /etc/passwd, "..") fails to open.
// It is answered as not found, as a name that is not there: serve tells
// nothing of what lies outside.
type inside struct{ fs.FS }

func (in inside) Open(name string) (fs.File, error) {
	f, err := in.FS.Open(name)
	if err != nil && !errors.Is(err, fs.ErrPermission) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return f, err
}
