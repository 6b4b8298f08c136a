// Package report draws what happened in a run as one self-contained HTML
// page (report.html: the verdicts, a timeline of every client's waits and
// holds with the server's truth, the resource's answers and the faults, and
// plots), and an index page over many run directories. Pages need no
// network: their scripts, styles and the charting library (uPlot, MIT) are
// inlined.
package report

import (
	"bytes"
	"cmp"
	_ "embed"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/nemesis"
)

var (
	//go:embed assets/uPlot.iife.min.js
	uplotJS string
	//go:embed assets/uPlot.min.css
	uplotCSS string
	//go:embed assets/report.js
	reportJS string
	//go:embed assets/report.css
	reportCSS string
	//go:embed assets/report.html
	reportHTML string
)

var page = template.Must(template.New("report").Parse(reportHTML))

// Write renders the report of a checked history to out. res are its
// results (with its backend's words, Results.Terms), with the history they
// judged (Results.Paired), which the page draws: the history is read and
// paired once, by the check. The files beside it worth opening are linked
// where they exist.
func Write(out string, res *harness.Results) error {
	// As harness.Check: the paired history lives on beside the page's
	// model and text.
	defer debug.SetGCPercent(debug.SetGCPercent(50))
	h := res.Paired()
	if h == nil {
		return fmt.Errorf("report: the results of %s carry no paired history (check it first)", res.History)
	}
	m, name := fromHistory(h)
	m.Meta = meta{
		Title: filepath.Base(filepath.Dir(out)), Verdict: string(res.Verdict), Exit: res.Exit, Required: res.Required,
		Seed: res.Seed, Versions: res.Versions, Reproduce: res.Command, Warnings: res.Warnings, Error: res.Error,
		Setup: h.Setup(), Scenario: res.Scenario, Shrunk: res.Shrunk,
		Legend: map[string]string{"expiry": res.Terms.LegendExpired, "lost": res.Terms.LegendLost,
			"race": cmp.Or(res.Terms.RaceShort, "lease") + " race (the earlier holder's key was gone first)"},
	}
	if m.Meta.Setup == nil {
		m.Meta.Setup = map[string]string{}
	}
	m.Meta.Cells = cells(res, h)
	if res.CutShort != nil {
		m.Meta.CutShort = res.CutShort.Summary
	}
	for _, c := range res.Checks {
		ck := check{Name: c.Name, Verdict: string(c.Verdict), Required: slices.Contains(res.Required, c.Name), Explanation: c.Explanation}
		for _, v := range c.Violations {
			vv := violation{Kind: v.Kind, Key: v.Key, From: ms(v.From), To: ms(v.To), Story: v.Story, Clients: []string{}}
			for _, p := range v.Processes {
				vv.Clients = append(vv.Clients, name(histories.Process(p)))
			}
			ck.Violations = append(ck.Violations, vv)
		}
		m.Checks = append(m.Checks, ck)
	}
	history := res.History
	dir := filepath.Dir(out)
	for _, f := range []string{filepath.Base(history), "results.json", "schedule.json", "mutex.html", "resource.html", "resource-log.jsonl", "logs"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			m.Links = append(m.Links, link{f, f})
		}
	}
	if base := strings.TrimSuffix(filepath.Base(history), ".jsonl"); base != "history" {
		m.Links = append(m.Links, link{base + ".results.json", base + ".results.json"})
	}
	data, err := m.marshal()
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	err = page.Execute(&buf, map[string]any{
		"Title":     m.Meta.Title,
		"UplotCSS":  template.CSS(uplotCSS),
		"ReportCSS": template.CSS(reportCSS),
		"UplotJS":   template.JS(uplotJS),
		"ReportJS":  template.JS(reportJS),
		"Data":      template.JS(safeJSON(data)),
	})
	if err != nil {
		return err
	}
	// Written whole, then renamed: a live page turns into the report once
	// it exists, and must not find half of it.
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// safeJSON keeps a JSON text from closing the script element it sits in.
func safeJSON(b []byte) string {
	return strings.NewReplacer("</", `<\/`, "<!--", `<\!--`).Replace(string(b))
}

// cells are the (lock state × fault) cells the run's faults struck: as the
// run counted them, or, for a history checked again, from its faults.
func cells(res *harness.Results, h *checker.History) []nemesis.Cell {
	if res.Run != nil && res.Run.Nemesis != nil {
		return res.Run.Nemesis.Cells
	}
	var fired []nemesis.Fired
	for _, f := range h.Faults() {
		fired = append(fired, nemesis.Fired{Fault: f.Fault, Targets: f.Targets, Params: f.Params})
	}
	return nemesis.CellsOf(fired)
}
