// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package procstat

import (
	"syscall"
	"time"
)

// SelfCPU is the CPU time (user and system, all threads, garbage collection
// included) the calling process has used. Benchmarks report it beside wall
// time: on a shared machine wall time mostly measures waiting. It is 0 where
// it cannot be measured.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
