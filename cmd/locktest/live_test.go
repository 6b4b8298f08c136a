package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// testRunLive plays a scenario with --live (in a child process): its page
// is served on 127.0.0.1 while the run goes and draws the history as it
// grows; when the run ends, the page leads to the report, which stays
// served until Ctrl-C; the exit status is the scenario's, and the summary
// says how it differs from the run's own. The CLI's own logic: on the
// fake backend, whose correct lock in memory leaves the scenario's
// expected harm unseen (exit 1; the run's own verdict, valid, would exit
// 0). A scenario's harm on real servers: TestRuns's other runs
// (RedlockBareQuorum, ZooKeeperGhostNode...).
func testRunLive(t *testing.T) {
	out := t.TempDir()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "LOCKTEST_CLI_FAKE=1", "LOCKTEST_CLI_ARGS=scenario run paused-holder --resource unfenced --seed 1 --live --live-addr 127.0.0.1:0 --out "+out)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 100)
	var said strings.Builder
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	// await reads the child's lines until one matches re.
	await := func(re *regexp.Regexp) []string {
		t.Helper()
		timeout := time.After(90 * time.Second)
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("locktest ended before saying %v:\n%s\nstderr: %s", re, said.String(), stderr.String())
				}
				said.WriteString(line + "\n")
				if m := re.FindStringSubmatch(line); m != nil {
					return m
				}
			case <-timeout:
				t.Fatalf("locktest did not say %v within 90 s:\n%s\nstderr: %s", re, said.String(), stderr.String())
			}
		}
	}
	page := await(regexp.MustCompile(`^live: (http://127\.0\.0\.1:\d+/[^ ]+/)live\.html$`))[1]

	// While the run goes: live.json draws the history so far, and it grows.
	end := func() float64 {
		resp, err := http.Get(page + "live.json")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v struct {
			Done string `json:"done"`
			Data *struct {
				End float64 `json:"end"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("live.json: %d, %v", resp.StatusCode, err)
		}
		if v.Data == nil {
			return -1 // done already
		}
		return v.Data.End
	}
	first := end()
	if !eventually(t, 30*time.Second, func() bool { e := end(); return e < 0 || e > first+500 }) {
		t.Errorf("live.json stayed at %v ms while the run went on", first)
	}

	await(regexp.MustCompile(`^live: the run ended; its report is served at .*report\.html until Ctrl-C$`))
	resp, err := http.Get(page + "live.html")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Request.URL.String() != page+"report.html" || !strings.Contains(string(b), `"verdict":"valid"`) {
		t.Errorf("after the run live.html led to %s (%d bytes); want the report, page %sreport.html", resp.Request.URL, len(b), page)
	}
	cmd.Process.Signal(os.Interrupt)
	err = cmd.Wait()
	for line := range lines {
		said.WriteString(line + "\n")
	}
	if code := cmd.ProcessState.ExitCode(); code != exitInvalid {
		t.Errorf("exit %d (%v), want 1 (the scenario's harm not seen)\n%s\nstderr: %s", code, err, said.String(), stderr.String())
	}
	for _, want := range []string{"scenario paused-holder: NOT as expected: resource is valid, expected invalid",
		"exit 1: a verdict is not the one it expects (a scenario exits on its expectations; the run's own verdict, valid, would exit 0)"} {
		if !strings.Contains(said.String(), want) {
			t.Errorf("the summary lacks %q:\n%s", want, said.String())
		}
	}
}
