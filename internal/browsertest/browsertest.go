// Package browsertest starts headless Chromium (Debian's chromium) for the
// tests that draw locktest's pages in a real browser. For tests only.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/locktest/locktest/internal/scratch"
)

// browser is the headless Chromium the tests of a process share: started by
// the first Start, closed by Close. A launch costs about a second of CPU
// (the wrapper script, the browser's processes); a tab costs little.
var browser struct {
	once    sync.Once
	skip    string // why the tests skip: no Chromium
	err     error
	ctx     context.Context // the browser's first tab; new tabs open beside it
	cancel  func()
	profile string
}

// Start opens a tab of headless Chromium for a test, or skips the test when
// the machine has none. The tab is closed when the test ends; the page's
// script errors are collected in the Errors returned. The browser is
// shared by the process's tests: a package that calls Start calls Close
// from its TestMain.
func Start(t testing.TB) (context.Context, *Errors) {
	t.Helper()
	browser.once.Do(launch)
	if browser.skip != "" {
		t.Skip(browser.skip)
	}
	if browser.err != nil {
		t.Fatal(browser.err)
	}
	ctx, cancelTab := chromedp.NewContext(browser.ctx)
	// The tab lasts as long as the test may (its -timeout, less a tenth of
	// what is left, so that it fails saying what it waited for): pages
	// render and are shot as fast as the machine lets them, no property
	// of theirs (TestReportNoGlitches' twelve shots outlasted the 60 s
	// that bounded a tab at a load of 20-30).
	cancelTimeout := func() {}
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if end, ok := d.Deadline(); ok {
			ctx, cancelTimeout = context.WithDeadline(ctx, end.Add(-time.Until(end)/10))
		}
	}
	t.Cleanup(func() {
		cancelTimeout()
		cancelTab()
	})
	errs := &Errors{}
	chromedp.ListenTarget(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			errs.add(ev.ExceptionDetails.Text)
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError {
				errs.add("console error")
			}
		}
	})
	return ctx, errs
}

// launch starts the shared browser.
func launch() {
	bin := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		browser.skip = "skipped: chromium is not installed (apt-get install chromium; .ci/run installs it)"
		return
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1400, 1000))
	// The profile is removed once Chromium has let go of it: it may still
	// write there while it exits. Everything Chromium writes goes there:
	// its temporary files (the singleton socket, left behind when it is
	// killed), its crash reports and caches under HOME. Named after this
	// process, a profile a killed test left is removed by the next locktest.
	profile, err := scratch.Dir("", "chromium")
	if err != nil {
		browser.err = err
		return
	}
	browser.profile = profile
	tmp := filepath.Join(profile, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		browser.err = err
		return
	}
	opts = append(opts, chromedp.UserDataDir(filepath.Join(profile, "profile")),
		chromedp.Env("TMPDIR="+tmp, "HOME="+profile, "XDG_CONFIG_HOME="+filepath.Join(profile, "config"), "XDG_CACHE_HOME="+filepath.Join(profile, "cache")))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	browser.ctx = ctx
	browser.cancel = func() {
		cancelCtx()
		cancelAlloc()
	}
	// The first Run starts the browser, so that the tests' contexts are
	// tabs of it; its context lives on, so the bound on the start stops
	// the browser instead of ending the context.
	stop := time.AfterFunc(60*time.Second, browser.cancel)
	err = chromedp.Run(ctx)
	if !stop.Stop() {
		err = fmt.Errorf("not started within 60 s (%v)", err)
	}
	if err != nil {
		browser.err = fmt.Errorf("starting %s: %w", bin, err)
	}
}

// Close stops the shared browser, if Start started it, and removes its
// profile.
func Close() {
	if browser.cancel == nil && browser.profile == "" {
		return
	}
	if browser.cancel != nil {
		browser.cancel()
	}
	deadline := time.Now().Add(10 * time.Second)
	for os.RemoveAll(browser.profile) != nil && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}

// Errors collects the page's exceptions and console errors, which arrive on
// the browser's goroutine.
type Errors struct {
	mu   sync.Mutex
	errs []string
}

func (s *Errors) add(e string) {
	s.mu.Lock()
	s.errs = append(s.errs, e)
	s.mu.Unlock()
}

// List returns the errors so far.
func (s *Errors) List() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.errs)
}
