// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package procstat

import "time"

// SelfCPU is not measured on this platform: it is always 0.
func SelfCPU() time.Duration { return 0 }
