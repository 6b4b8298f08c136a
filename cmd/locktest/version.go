package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/locktest/locktest/harness"
)

func versionCmd(args []string, stdout io.Writer) (int, error) {
	fs := newFlags("version", "version\n\nPrints locktest's version and commit (from the build's information) and the versions of\nGo and of the etcd, toxiproxy and porcupine built into it, as results.json records them.", stdout)
	if err := parseFlags(fs, args); err != nil {
		return exitUnknown, err
	}
	if fs.NArg() > 0 {
		return exitUnknown, fmt.Errorf("version: unexpected argument %q", fs.Arg(0))
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 1, ' ', 0)
	for _, c := range harness.BuildVersions(ownBackends) {
		v := c.Version
		if v == "" {
			v = "unknown (not recorded in the build)"
			if c.Name == "commit" {
				v = "unknown (the build recorded none: go run, a build outside a git checkout, or -buildvcs=false)"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\n", c.Name, v)
	}
	return exitValid, tw.Flush()
}
