// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package spoolexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/spoolexporter"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/deadletter"
)

// signal is what the spool needs of one signal: its resources and dead
// letter, and making
// its load balancer and exporters.
type signal[T any, E component.Component] struct {
	deadletter.Signal[T]
	newBalancer func(context.Context, exporter.Settings, component.Config) (E, error)
	newExporter func(context.Context, exporter.Settings, component.Config, func(context.Context, T) error, ...exporterhelper.Option) (E, error)
	consume     func(E) func(context.Context, T) error
}

var traces = signal[ptrace.Traces, exporter.Traces]{
	Signal:      deadletter.Traces,
	newBalancer: balancers.CreateTraces,
	newExporter: func(ctx context.Context, set exporter.Settings, cfg component.Config, push func(context.Context, ptrace.Traces) error, opts ...exporterhelper.Option) (exporter.Traces, error) {
		return exporterhelper.NewTraces(ctx, set, cfg, push, opts...)
	},
	consume: func(e exporter.Traces) func(context.Context, ptrace.Traces) error { return e.ConsumeTraces },
}

var metrics = signal[pmetric.Metrics, exporter.Metrics]{
	Signal:      deadletter.Metrics,
	newBalancer: balancers.CreateMetrics,
	newExporter: func(ctx context.Context, set exporter.Settings, cfg component.Config, push func(context.Context, pmetric.Metrics) error, opts ...exporterhelper.Option) (exporter.Metrics, error) {
		return exporterhelper.NewMetrics(ctx, set, cfg, push, opts...)
	},
	consume: func(e exporter.Metrics) func(context.Context, pmetric.Metrics) error { return e.ConsumeMetrics },
}

var logs = signal[plog.Logs, exporter.Logs]{
	Signal:      deadletter.Logs,
	newBalancer: balancers.CreateLogs,
	newExporter: func(ctx context.Context, set exporter.Settings, cfg component.Config, push func(context.Context, plog.Logs) error, opts ...exporterhelper.Option) (exporter.Logs, error) {
		return exporterhelper.NewLogs(ctx, set, cfg, push, opts...)
	},
	consume: func(e exporter.Logs) func(context.Context, plog.Logs) error { return e.ConsumeLogs },
}
