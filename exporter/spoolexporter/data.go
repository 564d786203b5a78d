// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package spoolexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/spoolexporter"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// resources reads one signal's resources, to split a request by slot.
type resources[T any] struct {
	len          func(T) int
	resource     func(T, int) pcommon.Resource
	copyResource func(src T, i int, dst T)
	empty        func() T
	items        func(T) int
}

// signal is what the spool needs of one signal: its resources, and making
// its load balancer and exporters.
type signal[T any, E component.Component] struct {
	resources[T]
	newBalancer func(context.Context, exporter.Settings, component.Config) (E, error)
	newExporter func(context.Context, exporter.Settings, component.Config, func(context.Context, T) error, ...exporterhelper.Option) (E, error)
	consume     func(E) func(context.Context, T) error
}

var traces = signal[ptrace.Traces, exporter.Traces]{
	resources: resources[ptrace.Traces]{
		len:      func(d ptrace.Traces) int { return d.ResourceSpans().Len() },
		resource: func(d ptrace.Traces, i int) pcommon.Resource { return d.ResourceSpans().At(i).Resource() },
		copyResource: func(d ptrace.Traces, i int, dst ptrace.Traces) {
			d.ResourceSpans().At(i).CopyTo(dst.ResourceSpans().AppendEmpty())
		},
		empty: ptrace.NewTraces,
		items: ptrace.Traces.SpanCount,
	},
	newBalancer: balancers.CreateTraces,
	newExporter: func(ctx context.Context, set exporter.Settings, cfg component.Config, push func(context.Context, ptrace.Traces) error, opts ...exporterhelper.Option) (exporter.Traces, error) {
		return exporterhelper.NewTraces(ctx, set, cfg, push, opts...)
	},
	consume: func(e exporter.Traces) func(context.Context, ptrace.Traces) error { return e.ConsumeTraces },
}

var metrics = signal[pmetric.Metrics, exporter.Metrics]{
	resources: resources[pmetric.Metrics]{
		len:      func(d pmetric.Metrics) int { return d.ResourceMetrics().Len() },
		resource: func(d pmetric.Metrics, i int) pcommon.Resource { return d.ResourceMetrics().At(i).Resource() },
		copyResource: func(d pmetric.Metrics, i int, dst pmetric.Metrics) {
			d.ResourceMetrics().At(i).CopyTo(dst.ResourceMetrics().AppendEmpty())
		},
		empty: pmetric.NewMetrics,
		items: pmetric.Metrics.DataPointCount,
	},
	newBalancer: balancers.CreateMetrics,
	newExporter: func(ctx context.Context, set exporter.Settings, cfg component.Config, push func(context.Context, pmetric.Metrics) error, opts ...exporterhelper.Option) (exporter.Metrics, error) {
		return exporterhelper.NewMetrics(ctx, set, cfg, push, opts...)
	},
	consume: func(e exporter.Metrics) func(context.Context, pmetric.Metrics) error { return e.ConsumeMetrics },
}

var logs = signal[plog.Logs, exporter.Logs]{
	resources: resources[plog.Logs]{
		len:      func(d plog.Logs) int { return d.ResourceLogs().Len() },
		resource: func(d plog.Logs, i int) pcommon.Resource { return d.ResourceLogs().At(i).Resource() },
		copyResource: func(d plog.Logs, i int, dst plog.Logs) {
			d.ResourceLogs().At(i).CopyTo(dst.ResourceLogs().AppendEmpty())
		},
		empty: plog.NewLogs,
		items: plog.Logs.LogRecordCount,
	},
	newBalancer: balancers.CreateLogs,
	newExporter: func(ctx context.Context, set exporter.Settings, cfg component.Config, push func(context.Context, plog.Logs) error, opts ...exporterhelper.Option) (exporter.Logs, error) {
		return exporterhelper.NewLogs(ctx, set, cfg, push, opts...)
	},
	consume: func(e exporter.Logs) func(context.Context, plog.Logs) error { return e.ConsumeLogs },
}
