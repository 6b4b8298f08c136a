package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io"

	"github.com/locktest/locktest/backend/registry"
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
// far (r, named name; the run directory's base name is title): the
// model, or, once the run has written its report (done), only where the
// report is.
func LiveJSON(r io.Reader, name, title string, done bool) ([]byte, error) {
	if done {
		return json.Marshal(map[string]string{"done": "report.html"})
	}
	data, err := liveModel(r, name, title)
	if err != nil {
		return nil, err
	}
	return append(append([]byte(`{"data":`), data...), '}'), nil
}

// WriteLive writes the live page of the history recorded so far.
func WriteLive(w io.Writer, r io.Reader, name, title string) error {
	data, err := liveModel(r, name, title)
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
func liveModel(r io.Reader, name, title string) ([]byte, error) {
	hr := histories.NewReader(r, name)
	hr.Reuse()
	b := checker.NewBuilder()
	b.Describe = nemesis.Describe
	b.Terms = registry.Terms
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
	m, _ := fromHistory(h)
	backend := h.Backend()
	if backend == "" {
		backend = registry.Default().Name
	}
	terms := registry.Terms(backend)
	m.Meta = meta{Title: title, Verdict: "running", Live: "live.json", Setup: h.Setup(),
		Legend: map[string]string{"expiry": terms.LegendExpired, "lost": terms.LegendLost}}
	if m.Meta.Setup == nil {
		m.Meta.Setup = map[string]string{}
	}
	return m.marshal()
}
