package report

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/backend/redis"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/internal/browsertest"
	"github.com/locktest/locktest/internal/histgen"
	"github.com/locktest/locktest/scenario"
)

// TestMain closes the browser the tests share (internal/browsertest).
func TestMain(m *testing.M) {
	code := m.Run()
	browsertest.Close()
	os.Exit(code)
}

// backends give the histories the tests draw their backends' words:
// Redis's own, and for etcd's histories a lease lock's words
// (checker.LeaseTerms, which etcd's are but for two sentences no page
// draws), so that the report's tests link no etcd server (the harness's
// curated tests check the histories with etcd's own).
var backends = backend.NewSet(backend.Backend{Name: "etcd", Terms: checker.LeaseTerms}, redis.Backend)

// checked re-checks a curated history (recorded from a real run) into a
// directory of its own, as `locktest check` does, and returns its results.
func checked(t *testing.T, dir, name string) *harness.Results {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "histories", "curated", name))
	if err != nil {
		t.Fatal(err)
	}
	history := filepath.Join(dir, "history.jsonl")
	if err := os.WriteFile(history, b, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := harness.Check(history, harness.CheckOptions{Backends: backends, Required: []string{"resource"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.WriteFile(filepath.Join(dir, "results.json")); err != nil {
		t.Fatal(err)
	}
	return res
}

// The report of a real split-brain, as a person sees it in Chromium: a lane
// per client, the faults that ran, every violation listed, and choosing one
// narrows the timeline to it; no script errors.
func TestReportInBrowser(t *testing.T) {
	dir := t.TempDir()
	res := checked(t, dir, "paused-holder-unfenced.jsonl")
	met := true
	res.Scenario = &harness.Scenario{Name: "paused-holder", Lesson: "A pause can strike between any check and the write.",
		Expect: map[string]string{"resource": "invalid"}, Met: &met,
		Bugs: []scenario.Bug{{Ref: "x#1", URL: "https://example.org/x/1", Seen: "x 1.0", Status: "open", Recipes: []string{"r"}}}}
	res.Shrunk = &harness.Shrunk{From: "runs/x", Failure: "resource", Summary: "3 faults over 20 s → 1 fault (pause-client c2 at 2.0 s for 3.4 s) over 8 s",
		Removed: []string{"isolate c1 at 6.0 s for 4.0 s", "slow c0 at 12.0 s for 2.5 s"}, Changed: []string{"--time 8s (was 20s)"}}
	out := filepath.Join(dir, "report.html")
	if err := Write(out, res); err != nil {
		t.Fatal(err)
	}
	ctx, errs := browsertest.Start(t)
	var lesson, expected, shrunk, header, reads, bug, bugURL string
	var lanes, faults, more []string
	var violations int
	var before, after [2]string
	err := chromedp.Run(ctx,
		chromedp.Navigate("file://"+out),
		chromedp.WaitVisible(`body[data-rendered="true"]`, chromedp.ByQuery),
		chromedp.Text("#lesson", &lesson, chromedp.ByQuery),
		chromedp.Text("#expected", &expected, chromedp.ByQuery),
		chromedp.Text(".bug", &bug, chromedp.ByQuery),
		chromedp.AttributeValue(".bug a", "href", &bugURL, nil),
		chromedp.Text("#shrunk", &shrunk, chromedp.ByQuery),
		chromedp.Text("#head .meta", &header, chromedp.ByQuery),
		chromedp.Text("#reads", &reads, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll("#lanes .lane-client")].map(e => e.textContent)`, &lanes),
		chromedp.Evaluate(`[...document.querySelectorAll("#flist li")].map(e => e.dataset.fault)`, &faults),
		chromedp.Evaluate(`document.querySelectorAll("#vlist li[data-check]").length`, &violations),
		chromedp.Evaluate(`[...document.querySelectorAll("#vlist li.more")].map(e => e.textContent)`, &more),
		chromedp.AttributeValue("#canvas", "data-from", &before[0], nil),
		chromedp.AttributeValue("#canvas", "data-to", &before[1], nil),
		chromedp.Click(`#vlist li[data-check="resource"]`, chromedp.ByQuery),
		chromedp.AttributeValue("#canvas", "data-from", &after[0], nil),
		chromedp.AttributeValue("#canvas", "data-to", &after[1], nil),
	)
	if err != nil {
		t.Fatal(err)
	}
	if e := errs.List(); len(e) > 0 {
		t.Errorf("script errors: %v", e)
	}
	if !strings.Contains(lesson, "paused-holder") || !strings.Contains(lesson, res.Scenario.Lesson) {
		t.Errorf("lesson shown as %q", lesson)
	}
	if bug != "upstream bug: x#1 (not fixed upstream: open), seen in x 1.0, with --recipe r" || bugURL != "https://example.org/x/1" {
		t.Errorf("the upstream bug shown as %q, linked to %q", bug, bugURL)
	}
	for _, want := range []string{res.Shrunk.Summary, "from runs/x", "removed: isolate c1 at 6.0 s for 4.0 s; slow c0 at 12.0 s for 2.5 s", "changed: --time 8s (was 20s)"} {
		if !strings.Contains(shrunk, want) {
			t.Errorf("what shrinking removed shown as %q, lacking %q", shrunk, want)
		}
	}
	if expected != "expected: resource invalid (as expected)" {
		t.Errorf("expectation shown as %q", expected)
	}
	missed := false
	res.Scenario.Met, res.Scenario.Missed = &missed, []harness.Miss{{Check: "resource", Got: "valid", Want: "invalid"}}
	if err := Write(out, res); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Run(ctx, chromedp.Navigate("file://"+out), chromedp.WaitVisible(`body[data-rendered="true"]`, chromedp.ByQuery),
		chromedp.Text("#expected", &expected, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if expected != "expected: resource invalid (NOT as expected: resource is valid, expected invalid)" {
		t.Errorf("a missed expectation shown as %q", expected)
	}
	// A lane per client, counted in the header; the final read (a process
	// of no client) is no lane, but said.
	if !slices.Equal(lanes, []string{"c0", "c1", "c2"}) || !strings.Contains(header, " 3 clients ") {
		t.Errorf("client lanes %v, header %q: want c0, c1, c2 and 3 clients", lanes, header)
	}
	if !strings.Contains(reads, "lock = 251") {
		t.Errorf("final read shown as %q", reads)
	}
	if !strings.Contains(strings.Join(faults, " "), "pause-client") {
		t.Errorf("faults listed %v, want the pause-client that ran", faults)
	}
	want, wantMore := 0, 0
	for _, c := range res.Checks {
		for _, v := range c.Violations {
			if len(v.Processes) == 0 {
				wantMore++
			} else {
				want++
			}
		}
	}
	if violations != want || want == 0 {
		t.Errorf("%d violations listed, results hold %d", violations, want)
	}
	// A count of the violations not told is no violation row of its own.
	if len(more) != wantMore || wantMore == 0 || !strings.HasPrefix(more[0], "and 30 more overlaps") {
		t.Errorf("rows that count the violations not told: %q, want %d", more, wantMore)
	}
	span := func(w [2]string) float64 {
		a, _ := strconv.ParseFloat(w[0], 64)
		b, _ := strconv.ParseFloat(w[1], 64)
		return b - a
	}
	if span(after) >= span(before)/2 {
		t.Errorf("choosing a violation showed %v ms, the whole run %v ms: want the window narrowed to it", span(after), span(before))
	}
}

// A lost reply (etcd#22082's release, recorded from a real run): the fault
// list says the reply was lost and what the client saw, and the timeline
// marks the cut on the lane of the client whose reply it was.
func TestReportLostReply(t *testing.T) {
	dir := t.TempDir()
	res := checked(t, dir, "etcd-22082-fenced.jsonl")
	out := filepath.Join(dir, "report.html")
	if err := Write(out, res); err != nil {
		t.Fatal(err)
	}
	ctx, errs := browsertest.Start(t)
	var said, lost, cells string
	err := chromedp.Run(ctx,
		chromedp.Navigate("file://"+out),
		chromedp.WaitVisible(`body[data-rendered="true"]`, chromedp.ByQuery),
		chromedp.Text(`#flist li[data-fault="lost-reply-release"] .lost-reply`, &said, chromedp.ByQuery),
		chromedp.AttributeValue("#canvas", "data-lost", &lost, nil),
		chromedp.Text(`#cells`, &cells, chromedp.ByQuery),
	)
	if err != nil {
		t.Fatal(err)
	}
	if e := errs.List(); len(e) > 0 {
		t.Errorf("script errors: %v", e)
	}
	if !strings.HasPrefix(said, "its release reply was lost (the client saw error: ") {
		t.Errorf("the lost reply listed as %q", said)
	}
	if lost != "c1" {
		t.Errorf("lost replies drawn on lanes %q, want c1's", lost)
	}
	// The cell the lost release struck, from the history's faults.
	if !strings.Contains(cells, "release-in-flight×lost-reply") {
		t.Errorf("cells line %q names no release-in-flight×lost-reply", cells)
	}
}

// Overlaps are drawn by the contract's class: in a history where a Put
// overwrote a live holder's key (the lock's bug) and a later holder's
// lease expired under it (the race), the page marks one of each.
func TestReportOverlapClasses(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join("..", "histories", "testdata", "overwritten-key.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	history := filepath.Join(dir, "history.jsonl")
	if err := os.WriteFile(history, b, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := harness.Check(history, harness.CheckOptions{Backends: backends, Required: []string{"contract"}})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "report.html")
	if err := Write(out, res); err != nil {
		t.Fatal(err)
	}
	ctx, errs := browsertest.Start(t)
	var classes, legend string
	if err := chromedp.Run(ctx, chromedp.Navigate("file://"+out),
		chromedp.WaitVisible(`body[data-rendered="true"]`, chromedp.ByQuery),
		chromedp.AttributeValue("#canvas", "data-overlaps", &classes, nil),
		chromedp.Text("#legend", &legend, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if e := errs.List(); len(e) > 0 {
		t.Errorf("script errors: %v", e)
	}
	if classes != "lock-bug lease-race" {
		t.Errorf("overlaps drawn as %q, want the lock's bug, then the lease race", classes)
	}
	// The legend explains the classes drawn (and no other).
	for _, want := range []string{"the lock's bug", "lease race"} {
		if !strings.Contains(legend, want) {
			t.Errorf("legend %q lacks %q", legend, want)
		}
	}
	if strings.Contains(legend, "not told apart") {
		t.Errorf("legend %q explains an undecided overlap the page does not draw", legend)
	}
}

// The legend speaks of the backend's own mechanism: leases on etcd, a
// TTL kept by a watchdog on Redis.
func TestReportLegendByBackend(t *testing.T) {
	ctx, errs := browsertest.Start(t)
	for history, want := range map[string]struct{ has, hasNot string }{
		"paused-holder-unfenced.jsonl":   {"noticed its lease was lost", "watchdog"},
		"redlock-restart-unfenced.jsonl": {"watchdog found its lock lost", "its lease"},
	} {
		dir := t.TempDir()
		res := checked(t, dir, history)
		out := filepath.Join(dir, "report.html")
		if err := Write(out, res); err != nil {
			t.Fatal(err)
		}
		var legend string
		if err := chromedp.Run(ctx, chromedp.Navigate("file://"+out),
			chromedp.WaitVisible(`body[data-rendered="true"]`, chromedp.ByQuery),
			chromedp.Text("#legend", &legend, chromedp.ByQuery)); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(legend, want.has) || strings.Contains(legend, want.hasNot) {
			t.Errorf("%s: legend %q; want %q in it, not %q", history, legend, want.has, want.hasNot)
		}
	}
	if e := errs.List(); len(e) > 0 {
		t.Errorf("script errors: %v", e)
	}
}

// The index lists every run of its directory, failures marked, and a run
// whose history is malformed gets a row saying where.
func TestIndexInBrowser(t *testing.T) {
	root := t.TempDir()
	for _, name := range []string{"paused-holder-unfenced", "paused-holder-fenced"} {
		run := filepath.Join(root, name)
		os.Mkdir(run, 0o755)
		res := checked(t, run, name+".jsonl")
		if err := Write(filepath.Join(run, "report.html"), res); err != nil {
			t.Fatal(err)
		}
	}
	bad := filepath.Join(root, "broken")
	os.Mkdir(bad, 0o755)
	os.WriteFile(filepath.Join(bad, "history.jsonl"), []byte("{\"type\":\"invoke\"\n"), 0o644)
	killed := killedRun(t, root)
	out, err := WriteIndex(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx, errs := browsertest.Start(t)
	var runs []string
	var failed, problem, cutRow, cutBanner, text string
	var png []byte
	err = chromedp.Run(ctx,
		chromedp.Navigate("file://"+out),
		chromedp.WaitVisible(`body[data-rendered="true"]`, chromedp.ByQuery),
		chromedp.FullScreenshot(&png, 100),
		chromedp.Text("body", &text, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll("#runs tbody tr")].map(r => r.dataset.run)`, &runs),
		chromedp.Evaluate(`document.querySelector('tr[data-run="paused-holder-unfenced"]').className`, &failed),
		chromedp.Evaluate(`document.querySelector('tr[data-run="broken"]').textContent`, &problem),
		chromedp.Evaluate(`document.querySelector('tr[data-run="killed"] td').textContent`, &cutRow),
		chromedp.Navigate("file://"+filepath.Join(killed, "report.html")),
		chromedp.WaitVisible(`body[data-rendered="true"]`, chromedp.ByQuery),
		chromedp.Text("#cut", &cutBanner, chromedp.ByQuery),
	)
	if err != nil {
		t.Fatal(err)
	}
	if e := errs.List(); len(e) > 0 {
		t.Errorf("script errors: %v", e)
	}
	keepScreenshot(t, "index", 1400, png)
	if strings.Contains(text, "1970") || strings.Contains(text, "Invalid Date") || strings.Contains(text, "undefined") {
		t.Errorf("the index says %q", text)
	}
	if len(runs) != 4 {
		t.Errorf("rows %v, want the 4 runs", runs)
	}
	if cutRow != "unknown, cut short" {
		t.Errorf("the killed run's row says %q, want it marked cut short", cutRow)
	}
	if !strings.HasPrefix(cutBanner, "cut short: the history stops at line 400 (") {
		t.Errorf("the killed run's report says %q, want where it was cut short", cutBanner)
	}
	if failed != "failed" {
		t.Errorf("the unfenced run's row is %q, want it marked failed", failed)
	}
	if !strings.Contains(problem, "history.jsonl:1:") {
		t.Errorf("the broken run's row says %q, want the history's file:line", problem)
	}
}

// killedRun makes run directory "killed" under root: the first 400 lines of
// a real run's history, as a run that promised its end event and was killed
// there leaves them, checked and reported.
func killedRun(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "histories", "curated", "paused-holder-fenced.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")[:400]
	lines[0] = strings.Replace(lines[0], `"params":{`, `"params":{"end":"recorded",`, 1)
	run := filepath.Join(root, "killed")
	os.Mkdir(run, 0o755)
	history := filepath.Join(run, "history.jsonl")
	if err := os.WriteFile(history, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := harness.Check(history, harness.CheckOptions{Backends: backends, Required: []string{"resource"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.CutShort == nil || res.Exit != harness.ExitUnknown {
		t.Fatalf("a history cut at line 400: cut %+v, exit %d", res.CutShort, res.Exit)
	}
	if err := res.WriteFile(filepath.Join(run, "results.json")); err != nil {
		t.Fatal(err)
	}
	if err := Write(filepath.Join(run, "report.html"), res); err != nil {
		t.Fatal(err)
	}
	return run
}

func TestIndexOfNoRuns(t *testing.T) {
	if _, err := WriteIndex(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no run directories") {
		t.Errorf("WriteIndex of an empty directory: %v", err)
	}
}

// BenchmarkRender opens a report page in Chromium until it has drawn: the
// time a reader waits. The page is $LOCKTEST_REPORT, or else that of a
// history of a million client records (125,000 acquisitions with reads,
// writes and releases on one lock), written as `locktest check` writes it.
// It reports the time from the navigation's start to the page drawn, by
// the page's own clock (ms-to-render), and as the test waited for it
// (ns/op). Run with
//
//	go test ./report -run '^$' -bench BenchmarkRender -benchtime 3x
func BenchmarkRender(b *testing.B) {
	path := os.Getenv("LOCKTEST_REPORT")
	if path == "" {
		path = millionReport(b)
	}
	abs, _ := filepath.Abs(path)
	ctx, _ := browsertest.Start(b)
	if err := chromedp.Run(ctx, chromedp.Navigate("about:blank")); err != nil {
		b.Fatal(err)
	}
	var rendered float64
	for b.Loop() {
		if err := chromedp.Run(ctx, chromedp.Navigate("file://"+abs),
			chromedp.WaitVisible(`body[data-rendered="true"]`, chromedp.ByQuery),
			chromedp.Evaluate(`window.renderMs`, &rendered)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(rendered, "ms-to-render")
}

// millionReport writes the report page of a generated history of a million
// client records and returns its path.
func millionReport(b *testing.B) string {
	dir := b.TempDir()
	history := filepath.Join(dir, "history.jsonl")
	if err := histgen.File(history, histgen.Million); err != nil {
		b.Fatal(err)
	}
	res, err := harness.Check(history, harness.CheckOptions{Backends: backends, Required: []string{"mutex", "resource"}})
	if err != nil {
		b.Fatal(err)
	}
	out := filepath.Join(dir, "report.html")
	if err := Write(out, res); err != nil {
		b.Fatal(err)
	}
	return out
}
