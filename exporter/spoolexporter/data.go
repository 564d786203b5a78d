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

// signal is what the spool needs of one signal's data: its letters, its
// protobuf encoding (the queue's records) and moving one's resources to
// the end of another (a batch of records in memory).
type signal[T any] struct {
	deadletter.Signal[T]
	marshal   func(T) ([]byte, error)
	unmarshal func([]byte) (T, error)
	moveTo    func(src, dst T)
}

// signalOf adds the signal's exporters (deadletter.Exporting) and making
// its load balancer.
type signalOf[T any, E component.Component] struct {
	signal[T]
	deadletter.Exporting[T, E]
	newBalancer func(context.Context, exporter.Settings, component.Config) (E, error)
}

var (
	traces = signalOf[ptrace.Traces, exporter.Traces]{
		signal: signal[ptrace.Traces]{
			Signal:    deadletter.Traces,
			marshal:   (&ptrace.ProtoMarshaler{}).MarshalTraces,
			unmarshal: (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces,
			moveTo:    func(src, dst ptrace.Traces) { src.ResourceSpans().MoveAndAppendTo(dst.ResourceSpans()) },
		},
		Exporting:   deadletter.TracesExporting,
		newBalancer: balancers.CreateTraces,
	}
	metrics = signalOf[pmetric.Metrics, exporter.Metrics]{
		signal: signal[pmetric.Metrics]{
			Signal:    deadletter.Metrics,
			marshal:   (&pmetric.ProtoMarshaler{}).MarshalMetrics,
			unmarshal: (&pmetric.ProtoUnmarshaler{}).UnmarshalMetrics,
			moveTo:    func(src, dst pmetric.Metrics) { src.ResourceMetrics().MoveAndAppendTo(dst.ResourceMetrics()) },
		},
		Exporting:   deadletter.MetricsExporting,
		newBalancer: balancers.CreateMetrics,
	}
	logs = signalOf[plog.Logs, exporter.Logs]{
		signal: signal[plog.Logs]{
			Signal:    deadletter.Logs,
			marshal:   (&plog.ProtoMarshaler{}).MarshalLogs,
			unmarshal: (&plog.ProtoUnmarshaler{}).UnmarshalLogs,
			moveTo:    func(src, dst plog.Logs) { src.ResourceLogs().MoveAndAppendTo(dst.ResourceLogs()) },
		},
		Exporting:   deadletter.LogsExporting,
		newBalancer: balancers.CreateLogs,
	}
)
