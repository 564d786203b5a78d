// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter"

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exporterhelper/xexporterhelper"

	"github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter/internal/metadata"
	"github.com/nemo-lens/otelcol-nemo/internal/sharedcomponent"
)

const (
	defaultTracesPath            = "traces.jsonl"
	defaultMetricsPath           = "metrics.jsonl"
	defaultLogsPath              = "logs.jsonl"
	defaultMissingAttributeValue = "unknown"
	defaultMaxOpenFiles          = 100
	defaultFilePermissions       = "0640"
	defaultFlushInterval         = time.Second
	// defaultMaxDistinctPaths: the three files of 3,000 runs written to
	// within an hour, more than a busy cluster runs at once.
	defaultMaxDistinctPaths = 9000
	// overflowDir holds the overflow files, <directory>/_overflow/<signal>.jsonl.
	overflowDir = "_overflow"
)

// NewFactory returns the factory of the jsonl_file exporter.
func NewFactory() exporter.Factory {
	s := &sharedExporters{m: sharedcomponent.NewMap[component.Config, *jsonlExporter](sharedcomponent.WithLast)}
	return exporter.NewFactory(
		metadata.Type,
		createDefaultConfig,
		exporter.WithTraces(s.createTraces, metadata.TracesStability),
		exporter.WithMetrics(s.createMetrics, metadata.MetricsStability),
		exporter.WithLogs(s.createLogs, metadata.LogsStability),
	)
}

func createDefaultConfig() component.Config {
	return &Config{
		QueueConfig:           configoptional.Some(exporterhelper.NewDefaultQueueConfig()),
		RetryConfig:           configretry.NewDefaultBackOffConfig(),
		TracesPath:            defaultTracesPath,
		MetricsPath:           defaultMetricsPath,
		LogsPath:              defaultLogsPath,
		MissingAttributeValue: defaultMissingAttributeValue,
		MaxOpenFiles:          defaultMaxOpenFiles,
		Append:                true,
		FilePermissions:       defaultFilePermissions,
		Compression:           compressionNone,
		FlushInterval:         defaultFlushInterval,
		MaxDistinctPaths:      defaultMaxDistinctPaths,
	}
}

// sharedExporters hands the exporters of one configuration the same
// jsonlExporter, shut down with the last of them (its queue drains into
// the files first). It belongs to one factory; there is no package state.
type sharedExporters struct {
	m *sharedcomponent.Map[component.Config, *jsonlExporter]
}

// newSignalExporter builds the part of the exporter that belongs to one
// signal, and its exporterhelper options (qs: its sending queue's encoding).
func (s *sharedExporters) newSignalExporter(set exporter.Settings, cfg *Config, path, signal string, qs xexporterhelper.QueueBatchSettings) (*signalExporter, []exporterhelper.Option, error) {
	tmpl, err := parsePathTemplate(path)
	if err != nil {
		return nil, nil, err
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, nil, fmt.Errorf("create telemetry: %w", err)
	}
	shared, err := s.m.Acquire(cfg, func() (*jsonlExporter, error) { return newJSONLExporter(cfg, set.Logger) })
	if err != nil {
		tb.Shutdown()
		return nil, nil, err
	}
	se := &signalExporter{jsonlExporter: shared.Unwrap(), shared: shared, tmpl: tmpl, overflow: overflowDir + "/" + signal + ".jsonl", tel: newTelemetry(tb), tb: tb, logger: set.Logger}
	opts := []exporterhelper.Option{
		exporterhelper.WithStart(shared.Start),
		exporterhelper.WithShutdown(se.shutdown),
		// No timeout: a file write cannot be interrupted, so canceling its
		// context would bound nothing (exporterhelper's default is 5s).
		exporterhelper.WithTimeout(exporterhelper.TimeoutConfig{}),
		exporterhelper.WithRetry(cfg.RetryConfig),
		xexporterhelper.WithQueueBatch(cfg.QueueConfig, qs),
	}
	return se, opts, nil
}

func (s *sharedExporters) createTraces(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Traces, error) {
	c := cfg.(*Config)
	se, opts, err := s.newSignalExporter(set, c, c.TracesPath, "traces", tracesSignal.queueBatchSettings())
	if err != nil {
		return nil, err
	}
	exp, err := xexporterhelper.NewTracesRequest(ctx, set, tracesSignal.converter, push(se, tracesSignal), opts...)
	if err != nil {
		se.abandon()
		return nil, err
	}
	return readOnlyTraces{exp}, nil
}

func (s *sharedExporters) createMetrics(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Metrics, error) {
	c := cfg.(*Config)
	se, opts, err := s.newSignalExporter(set, c, c.MetricsPath, "metrics", metricsSignal.queueBatchSettings())
	if err != nil {
		return nil, err
	}
	exp, err := xexporterhelper.NewMetricsRequest(ctx, set, metricsSignal.converter, push(se, metricsSignal), opts...)
	if err != nil {
		se.abandon()
		return nil, err
	}
	return readOnlyMetrics{exp}, nil
}

func (s *sharedExporters) createLogs(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Logs, error) {
	c := cfg.(*Config)
	se, opts, err := s.newSignalExporter(set, c, c.LogsPath, "logs", logsSignal.queueBatchSettings())
	if err != nil {
		return nil, err
	}
	exp, err := xexporterhelper.NewLogsRequest(ctx, set, logsSignal.converter, push(se, logsSignal), opts...)
	if err != nil {
		se.abandon()
		return nil, err
	}
	return readOnlyLogs{exp}, nil
}

// The exporters never change what they are handed (resourcesRequest), but
// exporterhelper declares that any exporter with queue batching does: these
// say what is true, so that the collector does not copy every batch for
// jsonl_file when another consumer reads the same data.
type (
	readOnlyTraces  struct{ exporter.Traces }
	readOnlyMetrics struct{ exporter.Metrics }
	readOnlyLogs    struct{ exporter.Logs }
)

func (readOnlyTraces) Capabilities() consumer.Capabilities  { return consumer.Capabilities{} }
func (readOnlyMetrics) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }
func (readOnlyLogs) Capabilities() consumer.Capabilities    { return consumer.Capabilities{} }
