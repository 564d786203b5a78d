// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package pdatautil // import "github.com/nemo-lens/otelcol-nemo/internal/pdatautil"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Ops are the resource-level operations on one signal's data, for a
// component that splits any signal's requests by resource (the spool by
// run slot, nemo_otlp's dead letters by run).
type Ops[T any] struct {
	Len          func(T) int
	Resource     func(T, int) pcommon.Resource
	CopyResource func(src T, i int, dst T)
	Empty        func() T
	Items        func(T) int
}

// TracesOps, MetricsOps and LogsOps are the Ops of each signal.
var (
	TracesOps = Ops[ptrace.Traces]{
		Len:      func(d ptrace.Traces) int { return d.ResourceSpans().Len() },
		Resource: func(d ptrace.Traces, i int) pcommon.Resource { return d.ResourceSpans().At(i).Resource() },
		CopyResource: func(d ptrace.Traces, i int, dst ptrace.Traces) {
			d.ResourceSpans().At(i).CopyTo(dst.ResourceSpans().AppendEmpty())
		},
		Empty: ptrace.NewTraces,
		Items: ptrace.Traces.SpanCount,
	}
	MetricsOps = Ops[pmetric.Metrics]{
		Len:      func(d pmetric.Metrics) int { return d.ResourceMetrics().Len() },
		Resource: func(d pmetric.Metrics, i int) pcommon.Resource { return d.ResourceMetrics().At(i).Resource() },
		CopyResource: func(d pmetric.Metrics, i int, dst pmetric.Metrics) {
			d.ResourceMetrics().At(i).CopyTo(dst.ResourceMetrics().AppendEmpty())
		},
		Empty: pmetric.NewMetrics,
		Items: pmetric.Metrics.DataPointCount,
	}
	LogsOps = Ops[plog.Logs]{
		Len:      func(d plog.Logs) int { return d.ResourceLogs().Len() },
		Resource: func(d plog.Logs, i int) pcommon.Resource { return d.ResourceLogs().At(i).Resource() },
		CopyResource: func(d plog.Logs, i int, dst plog.Logs) {
			d.ResourceLogs().At(i).CopyTo(dst.ResourceLogs().AppendEmpty())
		},
		Empty: plog.NewLogs,
		Items: plog.Logs.LogRecordCount,
	}
)
