package report

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/internal/browsertest"
	"github.com/locktest/locktest/internal/histgen"
)

// The live page of a run as its history is written (a real run's,
// written here in three parts, each ending in half a line, as a reader
// may find it mid-write), in Chromium: at each moment the timeline has
// grown (further in time, more faults, the overlaps as they came), with
// no glitch; once the run has written its report, the page becomes the
// report.
func TestLivePage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "histories", "curated", "paused-holder-unfenced.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	dir := t.TempDir()
	run := filepath.Join(dir, "run")
	os.Mkdir(run, 0o755)
	history := filepath.Join(run, "history.jsonl")
	f, err := os.Create(history)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	srv := httptest.NewServer(Live(root, http.FileServerFS(root.FS()), backends))
	defer srv.Close()

	ctx, errs := browsertest.Start(t)
	// The run is starting: its history is still empty.
	var none string
	if err := chromedp.Run(ctx, chromedp.Navigate(srv.URL+"/run/live.html"), chromedp.WaitVisible(`body[data-rendered="true"]`, chromedp.ByQuery),
		chromedp.Text("#vlist", &none, chromedp.ByQuery)); err != nil || none != "none so far" {
		t.Fatalf("the live page of an empty history: %q, %v", none, err)
	}
	type moment struct {
		end                    float64
		faults, overlaps, hold int
	}
	var seen []moment
	written := 0
	// 700 lines: c1 paused (a fault not yet ended); 1200: the pause over,
	// overlaps found; then all of it, the run over but not yet checked.
	for i, upTo := range []int{700, 1200, len(lines) - 1} {
		half := lines[upTo][:len(lines[upTo])/2]
		if _, err := f.WriteString(strings.Join(lines[written:upTo], "") + half); err != nil {
			t.Fatal(err)
		}
		written = upTo
		var m moment
		var ok bool
		wait := chromedp.Navigate(srv.URL + "/run/live.html")
		if i > 0 {
			wait = chromedp.Poll(`Number(document.body.dataset.end) > `+strconv.FormatFloat(seen[i-1].end, 'f', -1, 64), &ok)
		}
		err := chromedp.Run(ctx, wait, chromedp.WaitVisible(`body[data-rendered="true"]`, chromedp.ByQuery),
			chromedp.Evaluate(`Number(document.body.dataset.end)`, &m.end),
			chromedp.Evaluate(`document.querySelectorAll("#flist li[data-fault]").length`, &m.faults),
			chromedp.Evaluate(`document.querySelectorAll("#vlist li[data-overlap]").length`, &m.overlaps),
			chromedp.Evaluate(`window.drawn.marks.includes("hold") ? 1 : 0`, &m.hold))
		if err != nil {
			t.Fatalf("moment %d: %v", i+1, err)
		}
		for _, g := range glitches(t, ctx, errs, srv.URL+"/run/live.html", "live-"+strconv.Itoa(i+1), 1400) {
			t.Error(g)
		}
		// Rest the half line: it is the next part's first.
		if _, err := f.WriteString(lines[upTo][len(half):]); err != nil {
			t.Fatal(err)
		}
		written++
		seen = append(seen, m)
	}
	if a, b, c := seen[0], seen[1], seen[2]; !(a.end < b.end && b.end < c.end) || a.faults < 1 || c.faults <= a.faults || a.overlaps != 0 || b.overlaps == 0 || c.hold != 1 {
		t.Errorf("the live page at three moments: %+v; want it growing: later ends, more faults, overlaps once the pause is over", seen)
	}

	// The run checks its history and writes its report: the live page on
	// screen becomes it.
	res, err := harness.Check(history, harness.CheckOptions{Backends: backends, Required: []string{"resource"}})
	if err != nil {
		t.Fatal(err)
	}
	if seen[2].overlaps != res.MutexOverlaps {
		t.Errorf("the live page listed %d overlaps, the checked history has %d", seen[2].overlaps, res.MutexOverlaps)
	}
	if err := Write(filepath.Join(run, "report.html"), res); err != nil {
		t.Fatal(err)
	}
	var path, verdict string
	if err := chromedp.Run(ctx, chromedp.WaitVisible(`body[data-rendered="true"] #verdict:not(.running)`, chromedp.ByQuery),
		chromedp.Evaluate(`location.pathname`, &path), chromedp.Text("#verdict", &verdict, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if path != "/run/report.html" || verdict != string(res.Verdict) {
		t.Errorf("after the run the page is %s, verdict %q; want /run/report.html, %q", path, verdict, res.Verdict)
	}
}

// The served root's live.html lists the runs in progress (a history, no
// report yet), each linked to its live page.
func TestLiveInProgress(t *testing.T) {
	dir := t.TempDir()
	for run, files := range map[string][]string{"going": {"history.jsonl"}, "done": {"history.jsonl", "report.html"}, "notes": {"a.txt"}} {
		os.Mkdir(filepath.Join(dir, run), 0o755)
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(dir, run, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	srv := httptest.NewServer(Live(root, http.FileServerFS(root.FS()), backends))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/live.html")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if page := string(b); !strings.Contains(page, `<ul id="runs"><li><a href="going/live.html">going</a></li></ul>`) {
		t.Errorf("the runs in progress listed as:\n%s", page)
	}
}

// BenchmarkLiveJSON reads a history of a million client records (125,000
// acquisitions) as each poll of a live page does: the time is what the
// page waits per poll (it polls at most every fourth of it). Run with
//
//	go test ./report -run '^$' -bench BenchmarkLiveJSON -benchtime 3x
func BenchmarkLiveJSON(b *testing.B) {
	history := filepath.Join(b.TempDir(), "history.jsonl")
	if err := histgen.File(history, histgen.Million); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		f, err := os.Open(history)
		if err != nil {
			b.Fatal(err)
		}
		data, err := LiveJSON(f, "history.jsonl", "run", backends, false)
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(data))/1e6, "MB")
	}
}
