package ports

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// A port another process has claimed is not handed out, even while nothing
// is bound to it; once that process exits, it is free again.
func TestClaimedElsewhereIsSkipped(t *testing.T) {
	if os.Getenv("PORTS_TEST_HOLD") != "" {
		// The other process: claim the port, say so, hold it until stdin closes.
		p, _ := strconv.Atoi(os.Getenv("PORTS_TEST_HOLD"))
		if _, err := claim(p); err != nil {
			os.Stdout.WriteString("error " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Stdout.WriteString("held\n")
		var b [1]byte
		os.Stdin.Read(b[:])
		os.Exit(0)
	}
	ps, err := Reserve(1)
	if err != nil {
		t.Fatal(err)
	}
	p := ps[0]
	Release(ps)

	cmd := exec.Command(os.Args[0], "-test.run=^TestClaimedElsewhereIsSkipped$")
	cmd.Env = append(os.Environ(), "PORTS_TEST_HOLD="+strconv.Itoa(p))
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer in.Close()
	buf := make([]byte, 256)
	n, _ := out.Read(buf)
	if got := strings.TrimSpace(string(buf[:n])); got != "held" {
		t.Fatalf("the other process: %q", got)
	}

	if got, err := reserveIn(p, p+1, 1); err == nil {
		t.Fatalf("handed out %v, which another process holds", got)
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	got, err := reserveIn(p, p+1, 1)
	if err != nil {
		t.Fatalf("after the other process exited: %v", err)
	}
	Release(got)
}
