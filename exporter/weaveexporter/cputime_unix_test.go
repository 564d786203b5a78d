//go:build unix

package weaveexporter

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user and system) the test process has
// used: unlike wall time, it does not grow when other processes load the
// machine.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
