// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package spoolexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/spoolexporter"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/deadletter"
)

// codec is the spool's record of one signal: an OTLP request in protobuf,
// and merging records kept in memory (moving one's resources to the end of
// another).
type codec[T any] struct {
	marshal   func(T) ([]byte, error)
	unmarshal func([]byte) (T, error)
	moveTo    func(src, dst T)
}

// signal is what the spool needs of one signal: its letters and exporters
// (deadletter.Exporting), its records, and making its load balancer.
type signal[T any, E component.Component] struct {
	deadletter.Exporting[T, E]
	codec       codec[T]
	newBalancer func(context.Context, exporter.Settings, component.Config) (E, error)
}

var (
	traces = signal[ptrace.Traces, exporter.Traces]{
		Exporting: deadletter.TracesExporting,
		codec: codec[ptrace.Traces]{
			marshal:   (&ptrace.ProtoMarshaler{}).MarshalTraces,
			unmarshal: (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces,
			moveTo:    func(src, dst ptrace.Traces) { src.ResourceSpans().MoveAndAppendTo(dst.ResourceSpans()) },
		},
		newBalancer: balancers.CreateTraces,
	}
	metrics = signal[pmetric.Metrics, exporter.Metrics]{
		Exporting: deadletter.MetricsExporting,
		codec: codec[pmetric.Metrics]{
			marshal:   (&pmetric.ProtoMarshaler{}).MarshalMetrics,
			unmarshal: (&pmetric.ProtoUnmarshaler{}).UnmarshalMetrics,
			moveTo:    func(src, dst pmetric.Metrics) { src.ResourceMetrics().MoveAndAppendTo(dst.ResourceMetrics()) },
		},
		newBalancer: balancers.CreateMetrics,
	}
	logs = signal[plog.Logs, exporter.Logs]{
		Exporting: deadletter.LogsExporting,
		codec: codec[plog.Logs]{
			marshal:   (&plog.ProtoMarshaler{}).MarshalLogs,
			unmarshal: (&plog.ProtoUnmarshaler{}).UnmarshalLogs,
			moveTo:    func(src, dst plog.Logs) { src.ResourceLogs().MoveAndAppendTo(dst.ResourceLogs()) },
		},
		newBalancer: balancers.CreateLogs,
	}
)
