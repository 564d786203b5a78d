//go:build unix

package rankstrategyprocessor

import (
	"syscall"
	"time"
)

// processCPUTime is the CPU time the test process has used (user + system,
// all threads, garbage collection included). Benchmarks report it beside
// wall time because on a shared machine wall time mostly measures waiting.
func processCPUTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
