package serverkit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// versionWait bounds a server binary's answer to --version. It is instant
// on a quiet machine, yet redis-server's took over 10 s on this 2-core one
// at a load average of 45, where a 10 s bound called a working server
// missing.
var versionWait = time.Minute

// ErrNoAnswer is wrapped by Version's error when the binary did not answer
// within its bound: the machine is busy, not the binary missing.
var ErrNoAnswer = errors.New("no answer")

// Version runs `path --version` and returns what it printed on its
// standard output. Its error says why there is nothing to read: the
// binary failed (with the first line it wrote on standard error, and how
// to install it when install is not ""), or it gave no answer in time
// (wrapping ErrNoAnswer; installing would not help).
func Version(path, install string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), versionWait)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	switch {
	case ctx.Err() != nil:
		return "", fmt.Errorf("%s --version: %w within %v (is the machine overloaded?)", path, ErrNoAnswer, versionWait)
	case err != nil:
		if first, _, _ := strings.Cut(strings.TrimSpace(stderr.String()), "\n"); first != "" {
			err = fmt.Errorf("%v: %s", err, first)
		}
		if install != "" {
			return string(out), fmt.Errorf("%s --version failed: %w (install it: %s)", path, err, install)
		}
		return string(out), fmt.Errorf("%s --version failed: %w", path, err)
	}
	return string(out), nil
}
