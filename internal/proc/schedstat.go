package proc

import (
	"bytes"
	"os"
	"strconv"
)

// RunDelays is how long each thread of process pid has waited on a run
// queue, runnable but not run, since it started, by thread id: the second
// field of /proc/PID/task/TID/schedstat (nanoseconds). A thread that
// exits between the listing and the read is left out.
func RunDelays(pid int) (map[int]int64, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make(map[int]int64, len(ents))
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(dir + e.Name() + "/schedstat")
		if err != nil {
			continue
		}
		if f := bytes.Fields(b); len(f) >= 2 {
			if n, err := strconv.ParseInt(string(f[1]), 10, 64); err == nil {
				out[tid] = n
			}
		}
	}
	return out, nil
}
