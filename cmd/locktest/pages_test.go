package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/locktest/locktest/backend/registry"
	"github.com/locktest/locktest/internal/browsertest"
	"github.com/locktest/locktest/internal/shellwords"
)

var (
	picture = flag.Bool("picture", false, "TestFrontPagePicture: play the front page's run and write docs/report.png; with -course, each lesson's picture")
	course  = flag.Bool("course", false, "TestCourse: play every lesson's command (a few minutes); with -picture, draw each lesson's picture too")
)

// root is the repository's root, from this package's directory (tests that
// draw pictures run in a directory of their own, so that the page's
// reproduction command names runs/, as a user's would).
var root = func() string {
	abs, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		panic(err)
	}
	return abs
}()

// The front page stays one: short, its picture there, and every link of it
// and of the manual leads to a file (and a heading) that exists.
func TestFrontPage(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(readme, []byte("\n")); n > 150 {
		t.Errorf("README.md has %d lines: the front page keeps to about 150; the manual is docs/", n)
	}
	png, err := os.ReadFile(filepath.Join(root, "docs", "report.png"))
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("docs/report.png is not a PNG (%v): go test ./cmd/locktest -run TestFrontPagePicture -picture", err)
	}
	pages := []string{filepath.Join(root, "README.md")}
	err = filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			body, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("%s links to %s: %v", page, target, err)
				continue
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !slices.Contains(anchors(string(body)), anchor) {
				t.Errorf("%s links to %s: %s has no such heading", page, target, file)
			}
		}
	}
}

// anchors are the anchors a Markdown page's headings get, as GitHub makes
// them.
func anchors(page string) []string {
	var out []string
	for _, line := range strings.Split(page, "\n") {
		if h, ok := strings.CutPrefix(line, "#"); ok {
			out = append(out, anchor(strings.TrimLeft(h, "#")))
		}
	}
	return out
}

// TestFrontPagePicture draws the front page's picture, docs/report.png: a
// real run of a scenario, its report page in headless Chromium. Only with
// -picture, as it writes into the tree.
func TestFrontPagePicture(t *testing.T) {
	if !*picture {
		t.Skip("skipped: it plays a scenario (about 15 s) and writes docs/report.png; run with -picture")
	}
	t.Chdir(t.TempDir())
	code, stdout, stderr := runMain(t, "scenario", "run", "paused-holder", "--resource", "unfenced", "--seed", "1", "--out", "runs")
	// The scenario's exit status: 0 when its verdicts are the ones it
	// expects, the damage to the unfenced resource included.
	if code != exitValid {
		t.Fatalf("exit %d, want %d:\n%s\n%s", code, exitValid, stdout, stderr)
	}
	drawReport(t, stdout, filepath.Join(root, "docs", "report.png"))
}

// drawReport draws the report page of the run whose output is stdout in
// headless Chromium, into the PNG file out.
func drawReport(t *testing.T, stdout, out string) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^report: (.*)$`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no report line:\n%s", stdout)
	}
	page, err := filepath.Abs(m[1])
	if err != nil {
		t.Fatal(err)
	}
	// Chromium's singleton socket lives in its TMPDIR, and this package's
	// (TestMain's) makes the socket's path too long for a Unix socket: the
	// browser's profile goes in the temporary directory it is under.
	if tmp := os.Getenv("LOCKTEST_CMD_TESTS_TMPDIR"); tmp != "" {
		t.Setenv("TMPDIR", filepath.Dir(tmp))
	}
	ctx, errs := browsertest.Start(t)
	var png []byte
	err = chromedp.Run(ctx,
		chromedp.EmulateViewport(1400, 960), // the header, the checks and the timeline
		chromedp.Navigate("file://"+page),
		chromedp.WaitVisible(`body[data-rendered="true"]`, chromedp.ByQuery),
		chromedp.CaptureScreenshot(&png),
	)
	if err != nil {
		t.Fatal(err)
	}
	if e := errs.List(); len(e) > 0 {
		t.Fatalf("the page's script failed: %v", e)
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A lesson of the course: its one command, and what it says the run shows.
type lesson struct {
	file    string
	command []string
	verdict map[string]string // check -> verdict the lesson says it gives
	exit    int
	quotes  []string // what the lesson says the run prints
}

var (
	verdictLine = regexp.MustCompile(`(?m)^Verdicts \(the course test checks them\): (.*); exit status (\d)\.$`)
	verdictPair = regexp.MustCompile("`(\\w+)` (valid|invalid|unknown)")
	quoteLine   = regexp.MustCompile(`(?m)^> (.*)$`)
)

// lessons reads the course's lessons, in order.
func lessons(t *testing.T) []lesson {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "course", "[0-9]*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []lesson
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := string(text)
		l := lesson{file: filepath.Base(f), verdict: map[string]string{}}
		var commands []string
		for _, line := range strings.Split(s, "\n") {
			if c, ok := strings.CutPrefix(line, "    go run ./cmd/locktest "); ok {
				commands = append(commands, c)
			}
		}
		if len(commands) != 1 {
			t.Errorf("%s: want one command (an indented 'go run ./cmd/locktest ...' line), have %d", l.file, len(commands))
			continue
		}
		if l.command, err = shellwords.Split(commands[0]); err != nil {
			t.Errorf("%s: %v", l.file, err)
		}
		m := verdictLine.FindStringSubmatch(s)
		if m == nil {
			t.Errorf("%s: no line 'Verdicts (the course test checks them): ...; exit status N.'", l.file)
			continue
		}
		for _, p := range verdictPair.FindAllStringSubmatch(m[1], -1) {
			l.verdict[p[1]] = p[2]
		}
		l.exit = int(m[2][0] - '0')
		for _, q := range quoteLine.FindAllStringSubmatch(s, -1) {
			l.quotes = append(l.quotes, strings.Trim(q[1], "`"))
		}
		for _, part := range []string{"## Run it", "## What to look for", "## Question", "## Answer"} {
			if !strings.Contains(s, "\n"+part+"\n") {
				t.Errorf("%s has no %q section", l.file, part)
			}
		}
		out = append(out, l)
	}
	if len(out) < 6 || len(out) > 8 {
		t.Errorf("the course has %d lessons, want six to eight", len(out))
	}
	return out
}

// Every lesson is a scenario locktest plays, with its one command, what it
// says the run shows, a question and its answer; with -course, the test
// plays every lesson's command and checks that what the lesson says
// happens does.
func TestCourse(t *testing.T) {
	catalog := registry.Backends().Catalog()
	for _, l := range lessons(t) {
		t.Run(l.file, func(t *testing.T) {
			if len(l.command) < 3 || l.command[0] != "scenario" || l.command[1] != "run" {
				t.Fatalf("command %q: a lesson plays a scenario (locktest scenario run NAME ...)", l.command)
			}
			sc, err := catalog.Lookup(l.command[2])
			if err != nil {
				t.Fatal(err)
			}
			if len(l.verdict) == 0 {
				t.Fatal("the lesson names no verdict")
			}
			if !*course {
				t.Skip("skipped: playing the lesson takes 15-30 s; run with -course")
			}
			s := sc.Settings()
			if i := slices.Index(l.command, "--recipe"); i >= 0 && i+1 < len(l.command) {
				s.Recipe = l.command[i+1]
			}
			if err := missing(ownBackends, s, s.Recipe, s.Backend); err != nil {
				t.Skipf("skipped: %v", err)
			}
			t.Chdir(t.TempDir())
			code, stdout, stderr := runMain(t, append(slices.Clone(l.command), "--out", "runs")...)
			if code != l.exit {
				t.Errorf("exit status %d, the lesson says %d\n%s\n%s", code, l.exit, stdout, stderr)
			}
			for check, want := range l.verdict {
				m := regexp.MustCompile(`(?m)^  ` + check + `\s+(\w+)`).FindStringSubmatch(stdout)
				if m == nil || m[1] != want {
					t.Errorf("%s: %v, the lesson says %s\n%s", check, m, want, stdout)
				}
			}
			if *picture {
				drawReport(t, stdout, filepath.Join(root, "docs", "course", strings.TrimSuffix(l.file, ".md")+".png"))
			}
			flat := strings.Join(strings.Fields(stdout), " ")
			for _, q := range l.quotes {
				if !strings.Contains(flat, strings.Join(strings.Fields(q), " ")) {
					t.Errorf("the run did not print %q\n%s", q, stdout)
				}
			}
		})
	}
}
