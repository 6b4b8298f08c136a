package report

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/histories"
)

var (
	//go:embed assets/index.html
	indexHTML string
	//go:embed assets/index.js
	indexJS   string
	indexPage = template.Must(template.New("index").Parse(indexHTML))
)

// ErrNoRuns says a directory holds no run directories.
var ErrNoRuns = errors.New("no run directories (with a history.jsonl) under it")

// row is one run in the index.
type row struct {
	Dir      string            `json:"dir"`
	Time     time.Time         `json:"time"`
	Seed     *int64            `json:"seed,omitempty"`
	Recipe   string            `json:"recipe"`
	Resource string            `json:"resource"`
	Faults   string            `json:"faults"`
	Verdicts map[string]string `json:"verdicts"`
	Exit     int               `json:"exit"`
	Story    string            `json:"story,omitempty"`
	Report   string            `json:"report,omitempty"`
	Problem  string            `json:"problem,omitempty"`
	// CutShort says where a run cut short (killed, interrupted) stops.
	CutShort string `json:"cut_short,omitempty"`
}

// WriteIndex writes dir/index.html: a row for each run directory directly
// under dir (one holding history.jsonl), newest first, failures marked. A
// run whose history is malformed, or that has no results, gets a row saying
// what is wrong; the other rows are written all the same.
func WriteIndex(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	var rows []row
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		run := filepath.Join(dir, e.Name())
		if _, err := os.Stat(filepath.Join(run, "history.jsonl")); err != nil {
			continue
		}
		rows = append(rows, indexRow(run, e.Name()))
	}
	if len(rows) == 0 {
		return "", fmt.Errorf("report: %s: %w", dir, ErrNoRuns)
	}
	slices.SortStableFunc(rows, func(a, b row) int { return b.Time.Compare(a.Time) })
	data, err := json.Marshal(rows)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := indexPage.Execute(&buf, map[string]any{
		"Title": filepath.Base(dir), "CSS": template.CSS(reportCSS), "JS": template.JS(indexJS), "Data": template.JS(safeJSON(data)),
	}); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "index.html")
	return out, os.WriteFile(out, buf.Bytes(), 0o644)
}

func indexRow(run, name string) row {
	r := row{Dir: name, Verdicts: map[string]string{}, Exit: harness.ExitUnknown}
	if st, err := os.Stat(run); err == nil {
		r.Time = st.ModTime()
	}
	b, err := os.ReadFile(filepath.Join(run, "results.json"))
	if err != nil {
		// A check writes results only of a history it could read: without
		// them, the history may be why.
		if err := validHistory(filepath.Join(run, "history.jsonl")); err != nil {
			r.Problem = "history malformed: " + err.Error() + "; "
		}
		r.Problem += "no results.json (the run did not finish): locktest check " + name
		return r
	}
	var res struct {
		harness.Results
		Config struct {
			Recipe   string `json:"recipe"`
			Resource string `json:"resource"`
			Nemesis  struct {
				Faults []string `json:"faults"`
			} `json:"nemesis"`
		} `json:"config"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		r.Problem = "results.json unreadable: " + err.Error()
		return r
	}
	r.Seed, r.Exit = res.Seed, res.Exit
	if res.CutShort != nil {
		r.CutShort = res.CutShort.Summary
	}
	r.Recipe, r.Resource, r.Faults = res.Config.Recipe, res.Config.Resource, strings.Join(res.Config.Nemesis.Faults, ",")
	for _, c := range res.Checks {
		r.Verdicts[c.Name] = string(c.Verdict)
		if c.Verdict != "valid" && slices.Contains(res.Required, c.Name) && r.Story == "" {
			r.Story = c.Name + ": " + firstSentence(c.Explanation)
		}
	}
	if _, err := os.Stat(filepath.Join(run, "report.html")); err == nil {
		r.Report = name + "/report.html"
	}
	return r
}

func validHistory(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	rd := histories.NewReader(f, path)
	rd.Reuse() // nothing is kept
	for {
		if _, err := rd.Next(); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}

func firstSentence(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 240 {
		s = s[:240] + "…"
	}
	return s
}
