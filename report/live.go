package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/nemesis"
)

// A live page draws a run as it goes: the report page (the same script
// and styles) of the history recorded so far, which asks LiveJSON for
// that history again every second and draws what it adds, until the run
// has written its report.html, which then replaces it. It reads only the
// history file as the run writes it (line by line), so it can follow a
// run started by another process, from its run directory.

// LiveJSON is a live page's answer, read from the history as recorded so
// far (r, named name; the run directory's base name is title; backends
// give its backend's words): the model, or, once the run has written its
// report (done), only where the report is.
func LiveJSON(r io.Reader, name, title string, backends *backend.Set, done bool) ([]byte, error) {
	if done {
		return json.Marshal(map[string]string{"done": "report.html"})
	}
	data, err := liveModel(r, name, title, backends)
	if err != nil {
		return nil, err
	}
	return append(append([]byte(`{"data":`), data...), '}'), nil
}

// WriteLive writes the live page of the history recorded so far.
func WriteLive(w io.Writer, r io.Reader, name, title string, backends *backend.Set) error {
	data, err := liveModel(r, name, title, backends)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	err = page.Execute(&buf, map[string]any{
		"Title":     title + " (live)",
		"UplotCSS":  template.CSS(uplotCSS),
		"ReportCSS": template.CSS(reportCSS),
		"UplotJS":   template.JS(uplotJS),
		"ReportJS":  template.JS(reportJS),
		"Data":      template.JS(safeJSON(data)),
	})
	if err != nil {
		return err
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// liveModel pairs the history recorded so far (an operation in flight is
// drawn as still waiting, a torn last line is skipped) and draws its
// model: no checks yet, and meta.live, where the page asks for more.
func liveModel(r io.Reader, name, title string, backends *backend.Set) ([]byte, error) {
	hr := histories.NewReader(r, name)
	hr.Reuse()
	b := checker.NewBuilder()
	b.Describe = nemesis.Describe
	b.Terms = backends.Terms
	for {
		op, err := hr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if err := b.AddPaired(op, hr.Completes()); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	h := b.Finish()
	m, who := fromHistory(h)
	// A client that has not released a lock holds it still, as far as
	// anyone can tell while the run goes: its hold reaches the end drawn
	// (the checks end it where the client was last seen).
	last := map[int]checker.Belief{}
	for _, bl := range h.Overlaps().Beliefs {
		if prev, ok := last[bl.Process]; !ok || bl.From >= prev.From {
			last[bl.Process] = bl
		}
	}
	for p, bl := range last {
		l := m.Lanes[who(histories.Process(p))]
		for i := 0; bl.Ended == "last-seen" && i+5 <= len(l.H); i += 5 {
			if l.H[i+3] == float64(bl.AcquireIndex) {
				l.H[i+1] = m.End
			}
		}
	}
	terms := backends.Terms(h.Backend()) // "": the default's
	m.Meta = meta{Title: title, Verdict: "running", Live: "live.json", Setup: h.Setup(),
		Legend: map[string]string{"expiry": terms.LegendExpired, "lost": terms.LegendLost}}
	if m.Meta.Setup == nil {
		m.Meta.Setup = map[string]string{}
	}
	return m.marshal()
}

// Live serves, beside files, the live page of each run directory under
// root: DIR/live.html and what it asks for, DIR/live.json, drawn from
// DIR/history.jsonl as it stands; once DIR/report.html exists, live.html
// leads there. The root's live.html (unless the root is a run directory)
// lists the runs in progress under it. backends give each history's
// backend its words.
func Live(root *os.Root, files http.Handler, backends *backend.Set) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dir, file := path.Split(path.Clean("/" + r.URL.Path))
		if file != "live.html" && file != "live.json" {
			files.ServeHTTP(w, r)
			return
		}
		dir = path.Clean("." + dir)
		var history io.Reader
		f, err := root.Open(path.Join(dir, "history.jsonl"))
		switch st, serr := root.Stat(dir); {
		case err == nil:
			defer f.Close()
			history = f
		case dir == "." && file == "live.html":
			inProgress(w, root)
			return
		case errors.Is(err, fs.ErrNotExist) && serr == nil && st.IsDir():
			history = strings.NewReader("") // a run starting: no history yet
		default:
			http.NotFound(w, r)
			return
		}
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
			err = WriteLive(&buf, history, "history.jsonl", title, backends)
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
		default:
			var b []byte
			b, err = LiveJSON(history, "history.jsonl", title, backends, done)
			buf.Write(b)
			w.Header().Set("Content-Type", "application/json")
		}
		if err != nil {
			http.Error(w, strings.ReplaceAll(err.Error(), "\n", "; "), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		w.Write(buf.Bytes())
	})
}

// inProgress lists the run directories under root that have a history and
// no report yet, each linked to its live page; it looks again every 2 s.
func inProgress(w http.ResponseWriter, root *os.Root) {
	var runs []string
	entries, _ := fs.ReadDir(root.FS(), ".")
	for _, e := range entries {
		_, herr := root.Stat(path.Join(e.Name(), "history.jsonl"))
		_, rerr := root.Stat(path.Join(e.Name(), "report.html"))
		if e.IsDir() && herr == nil && rerr != nil {
			runs = append(runs, e.Name())
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	inProgressPage.Execute(w, runs)
}

var inProgressPage = template.Must(template.New("runs").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="2"><title>locktest: runs in progress</title>
<style>body { font: 14px/1.4 system-ui, sans-serif; margin: 1em 1.5em; }</style></head>
<body><h1>Runs in progress</h1>
{{if .}}<ul id="runs">{{range .}}<li><a href="{{.}}/live.html">{{.}}</a></li>{{end}}</ul>{{else}}<p id="runs">none (this page looks again every 2 s)</p>{{end}}
</body></html>
`))
