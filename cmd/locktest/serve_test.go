package main

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestServe runs locktest serve for real (in a child process, stopped by
// Ctrl-C, --addr after DIR): it serves DIR's files and links that stay
// inside DIR, to GET and HEAD only, on loopback; a link that leads out of
// DIR is not found, and nothing of what it points to is sent.
func TestServe(t *testing.T) {
	outside := t.TempDir()
	const secret = "root:x:0:0:the secret outside DIR"
	write(t, filepath.Join(outside, "passwd"), secret)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "index.html"), "<title>runs</title>")
	write(t, filepath.Join(dir, "run1", "report.html"), "the report of run1")
	for link, to := range map[string]string{
		"passwd":        filepath.Join(outside, "passwd"),                            // absolute, to a file outside
		"elsewhere":     outside,                                                     // to a directory outside
		"run1/up":       filepath.Join("..", "..", filepath.Base(outside), "passwd"), // relative, climbing out
		"latest":        "run1",                                                      // inside: served
		"run1/previous": filepath.Join("..", "index.html"),                           // inside: served
	} {
		if err := os.Symlink(to, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}

	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "LOCKTEST_CLI_ARGS=serve "+dir+" --addr 127.0.0.1:0")
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
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, stdout)
	}()
	var base string
	select {
	case line := <-lines:
		m := regexp.MustCompile(`^serving .* at (http://127\.0\.0\.1:\d+)/ `).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("serve said %q (stderr %q); want it serving on 127.0.0.1", line, stderr.String())
		}
		base = m[1]
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not start within 30 s (stderr %q)", stderr.String())
	}

	for _, tc := range []struct {
		method, path string
		status       int
		body         string
	}{
		{"GET", "/", 200, "<title>runs</title>"},
		{"GET", "/run1/report.html", 200, "the report of run1"},
		{"HEAD", "/run1/report.html", 200, ""},
		{"GET", "/latest/report.html", 200, "the report of run1"},
		{"GET", "/run1/previous", 200, "<title>runs</title>"},
		{"GET", "/passwd", 404, ""},
		{"HEAD", "/passwd", 404, ""},
		{"GET", "/elsewhere/passwd", 404, ""},
		{"GET", "/elsewhere/", 404, ""},
		{"GET", "/run1/up", 404, ""},
		{"GET", "/run1/../../" + filepath.Base(outside) + "/passwd", 404, ""},
		{"POST", "/run1/report.html", 405, ""},
		{"PUT", "/run1/new.html", 405, ""},
		{"DELETE", "/index.html", 405, ""},
	} {
		req, err := http.NewRequest(tc.method, base+tc.path, strings.NewReader(""))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.body) || strings.Contains(string(b), "secret") {
			t.Errorf("%s %s: %d %q; want %d with %q", tc.method, tc.path, resp.StatusCode, b, tc.status, tc.body)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "run1", "new.html")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a PUT wrote into DIR: %v", err)
	}

	cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		t.Errorf("serve stopped by Ctrl-C: %v (stderr %q), want exit 0", err, stderr.String())
	}
}

// write writes a file, making its directory.
func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
