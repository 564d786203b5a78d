//go:build !unix

package rankstrategyprocessor

import "time"

// processCPUTime is not measured on this platform; benchmarks then report
// wall time only.
func processCPUTime() (time.Duration, bool) { return 0, false }
