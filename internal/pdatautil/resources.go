// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package pdatautil // import "github.com/nemo-lens/otelcol-nemo/internal/pdatautil"

import "go.opentelemetry.io/collector/pdata/pcommon"

// Resource is one resource of any signal: ptrace.ResourceSpans,
// pmetric.ResourceMetrics, plog.ResourceLogs.
type Resource interface {
	Resource() pcommon.Resource
}

// Resources is a signal's slice of resources (ptrace.ResourceSpansSlice,
// pmetric.ResourceMetricsSlice, plog.ResourceLogsSlice), so that a
// component that treats every signal's resources alike writes its loop
// once.
type Resources[R Resource] interface {
	Len() int
	At(i int) R
}
