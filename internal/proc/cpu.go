package proc

import (
	"fmt"
	"strconv"
	"syscall"
	"time"
)

// clockTick is the unit of the CPU times in /proc/PID/stat: USER_HZ, which
// Linux fixes at 100 for user space whatever the kernel's own tick rate.
const clockTick = 10 * time.Millisecond

// CPU is the CPU time (user and system, all threads) process pid has used
// so far, from /proc/PID/stat.
func CPU(pid int) (time.Duration, error) {
	// utime and stime are fields 14 and 15.
	f, err := stat(pid)
	if err != nil {
		return 0, err
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proc: cannot parse /proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// ServerCPU is the CPU time used so far by the processes pids and by every
// child of this process that has exited and been reaped. Read before and
// after a phase, its difference is what the servers used in between, even
// when one was killed and restarted: a killed server's time moves from its
// own /proc entry to this process's reaped children when it is reaped, and
// its successor's counts from zero. A pid that has gone counts nothing.
func ServerCPU(pids []int) time.Duration {
	var ru syscall.Rusage
	var total time.Duration
	if syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) == nil {
		total = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	for _, pid := range pids {
		if d, err := CPU(pid); err == nil {
			total += d
		}
	}
	return total
}
