// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package deadletter // import "github.com/nemo-lens/otelcol-nemo/internal/deadletter"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Exporting is what an exporter of every signal built on this package
// (nemo_otlp, nemo_awss3, the spool) needs of one signal: its letters,
// exporterhelper's constructor of its exporters around a push function,
// and the consume function of one of them.
type Exporting[T any, E component.Component] struct {
	Signal[T]
	NewExporter func(context.Context, exporter.Settings, component.Config, func(context.Context, T) error, ...exporterhelper.Option) (E, error)
	Consume     func(E) func(context.Context, T) error
}

// TracesExporting, MetricsExporting and LogsExporting are the signals'.
var (
	TracesExporting = Exporting[ptrace.Traces, exporter.Traces]{
		Signal: Traces,
		NewExporter: func(ctx context.Context, set exporter.Settings, cfg component.Config, push func(context.Context, ptrace.Traces) error, opts ...exporterhelper.Option) (exporter.Traces, error) {
			return exporterhelper.NewTraces(ctx, set, cfg, push, opts...)
		},
		Consume: func(e exporter.Traces) func(context.Context, ptrace.Traces) error { return e.ConsumeTraces },
	}
	MetricsExporting = Exporting[pmetric.Metrics, exporter.Metrics]{
		Signal: Metrics,
		NewExporter: func(ctx context.Context, set exporter.Settings, cfg component.Config, push func(context.Context, pmetric.Metrics) error, opts ...exporterhelper.Option) (exporter.Metrics, error) {
			return exporterhelper.NewMetrics(ctx, set, cfg, push, opts...)
		},
		Consume: func(e exporter.Metrics) func(context.Context, pmetric.Metrics) error { return e.ConsumeMetrics },
	}
	LogsExporting = Exporting[plog.Logs, exporter.Logs]{
		Signal: Logs,
		NewExporter: func(ctx context.Context, set exporter.Settings, cfg component.Config, push func(context.Context, plog.Logs) error, opts ...exporterhelper.Option) (exporter.Logs, error) {
			return exporterhelper.NewLogs(ctx, set, cfg, push, opts...)
		},
		Consume: func(e exporter.Logs) func(context.Context, plog.Logs) error { return e.ConsumeLogs },
	}
)
