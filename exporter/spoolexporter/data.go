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

// signal is what the spool needs of one signal: its letters and exporters
// (deadletter.Exporting), and making its load balancer.
type signal[T any, E component.Component] struct {
	deadletter.Exporting[T, E]
	newBalancer func(context.Context, exporter.Settings, component.Config) (E, error)
}

var (
	traces  = signal[ptrace.Traces, exporter.Traces]{deadletter.TracesExporting, balancers.CreateTraces}
	metrics = signal[pmetric.Metrics, exporter.Metrics]{deadletter.MetricsExporting, balancers.CreateMetrics}
	logs    = signal[plog.Logs, exporter.Logs]{deadletter.LogsExporting, balancers.CreateLogs}
)
