// Package report draws what happened in a run as one self-contained HTML
// page (report.html: the verdicts, a timeline of every client's waits and
// holds with the server's truth, the resource's answers and the faults, and
// plots), and an index page over many run directories. Pages need no
// network: their scripts, styles and the charting library (uPlot, MIT) are
// inlined.
package report

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/histories"
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
// results (with its backend's words, Results.Terms); history is the history
// file. The files beside it worth opening are linked where they exist.
func Write(out string, res *harness.Results, history string) error {
	b, h, err := readHistory(history)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	m := b.m
	m.Meta = meta{
		Title: filepath.Base(filepath.Dir(out)), Verdict: string(res.Verdict), Exit: res.Exit, Required: res.Required,
		Seed: res.Seed, Versions: res.Versions, Reproduce: res.Command, Warnings: res.Warnings, Error: res.Error,
		Setup: b.setup, Scenario: res.Scenario, Shrunk: res.Shrunk,
		Legend: map[string]string{"expiry": res.Terms.LegendExpired, "lost": res.Terms.LegendLost},
	}
	if res.CutShort != nil {
		m.Meta.CutShort = res.CutShort.Summary
	}
	name := func(p int) string { return b.client(histories.Process(p)) }
	for _, c := range res.Checks {
		ck := check{Name: c.Name, Verdict: string(c.Verdict), Required: slices.Contains(res.Required, c.Name), Explanation: c.Explanation}
		for _, v := range c.Violations {
			vv := violation{Kind: v.Kind, Key: v.Key, From: ms(v.From), To: ms(v.To), Story: v.Story, Clients: []string{}}
			for _, p := range v.Processes {
				vv.Clients = append(vv.Clients, name(p))
			}
			ck.Violations = append(ck.Violations, vv)
		}
		m.Checks = append(m.Checks, ck)
	}
	for _, o := range h.Overlaps().Overlaps {
		m.Overlaps = append(m.Overlaps, []any{ms(o.From), ms(o.To), name(o.First.Process), name(o.Second.Process), o.Key})
	}
	dir := filepath.Dir(out)
	for _, f := range []string{filepath.Base(history), "results.json", "schedule.json", "mutex.html", "resource.html", "resource-log.jsonl", "logs"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			m.Links = append(m.Links, link{f, f})
		}
	}
	if base := strings.TrimSuffix(filepath.Base(history), ".jsonl"); base != "history" {
		m.Links = append(m.Links, link{base + ".results.json", base + ".results.json"})
	}
	data, err := json.Marshal(m)
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
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

// safeJSON keeps a JSON text from closing the script element it sits in.
func safeJSON(b []byte) string {
	return strings.NewReplacer("</", `<\/`, "<!--", `<\!--`).Replace(string(b))
}
