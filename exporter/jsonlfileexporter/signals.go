// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter"

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	pdatareq "go.opentelemetry.io/collector/pdata/xpdata/request"

	"github.com/nemo-lens/otelcol-nemo/internal/pdatautil"
)

// The three signals of a resourcesRequest.
var (
	tracesSignal = &signal[ptrace.Traces, ptrace.ResourceSpans]{
		resources: func(td ptrace.Traces) []ptrace.ResourceSpans { return collect(td.ResourceSpans()) },
		encode:    (*recordEncoder).appendResourceSpans,
		retryErr:  consumererror.NewTraces,
		items:     pdatautil.CountSpans,
		size:      (&ptrace.ProtoMarshaler{}).ResourceSpansSize,
		data:      copyInto(ptrace.NewTraces, func(td ptrace.Traces) ptrace.ResourceSpans { return td.ResourceSpans().AppendEmpty() }),
		errData:   errData[ptrace.Traces, consumererror.Traces],
		marshal:   pdatareq.MarshalTraces,
		unmarshal: orPlainOTLP(pdatareq.UnmarshalTraces, (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces),
	}
	metricsSignal = &signal[pmetric.Metrics, pmetric.ResourceMetrics]{
		resources: func(md pmetric.Metrics) []pmetric.ResourceMetrics { return collect(md.ResourceMetrics()) },
		encode:    (*recordEncoder).appendResourceMetrics,
		retryErr:  consumererror.NewMetrics,
		items:     pdatautil.CountDataPoints,
		size:      (&pmetric.ProtoMarshaler{}).ResourceMetricsSize,
		data:      copyInto(pmetric.NewMetrics, func(md pmetric.Metrics) pmetric.ResourceMetrics { return md.ResourceMetrics().AppendEmpty() }),
		errData:   errData[pmetric.Metrics, consumererror.Metrics],
		marshal:   pdatareq.MarshalMetrics,
		unmarshal: orPlainOTLP(pdatareq.UnmarshalMetrics, (&pmetric.ProtoUnmarshaler{}).UnmarshalMetrics),
	}
	logsSignal = &signal[plog.Logs, plog.ResourceLogs]{
		resources: func(ld plog.Logs) []plog.ResourceLogs { return collect(ld.ResourceLogs()) },
		encode:    (*recordEncoder).appendResourceLogs,
		retryErr:  consumererror.NewLogs,
		items:     pdatautil.CountLogRecords,
		size:      (&plog.ProtoMarshaler{}).ResourceLogsSize,
		data:      copyInto(plog.NewLogs, func(ld plog.Logs) plog.ResourceLogs { return ld.ResourceLogs().AppendEmpty() }),
		errData:   errData[plog.Logs, consumererror.Logs],
		marshal:   pdatareq.MarshalLogs,
		unmarshal: orPlainOTLP(pdatareq.UnmarshalLogs, (&plog.ProtoUnmarshaler{}).UnmarshalLogs),
	}
)

// collect returns the resources of a batch, as a slice.
func collect[R pdatautil.Resource, S pdatautil.Resources[R]](rs S) []R {
	out := make([]R, rs.Len())
	for i := range out {
		out[i] = rs.At(i)
	}
	return out
}

// copyInto returns a function that copies resources into new data.
func copyInto[T any, R interface{ CopyTo(R) }](empty func() T, appendEmpty func(T) R) func([]R) T {
	return func(rs []R) T {
		data := empty()
		for _, r := range rs {
			r.CopyTo(appendEmpty(data))
		}
		return data
	}
}

// errData returns the data that err (a consumererror.Traces, ...) says to retry.
func errData[T any, E interface {
	error
	Data() T
}](err error) (T, bool) {
	if e, ok := errors.AsType[E](err); ok {
		return e.Data(), true
	}
	var zero T
	return zero, false
}

// orPlainOTLP reads xpdata's request format, or plain OTLP: what a
// persistent queue holds when it was written before requests carried their
// context (exporterhelper reads both the same way).
func orPlainOTLP[T any](request func([]byte) (context.Context, T, error), plain func([]byte) (T, error)) func([]byte) (context.Context, T, error) {
	return func(b []byte) (context.Context, T, error) {
		ctx, data, err := request(b)
		if errors.Is(err, pdatareq.ErrInvalidFormat) {
			data, err = plain(b)
		}
		return ctx, data, err
	}
}
