// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pipeline"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/nemo-lens/otelcol-nemo/internal/clock"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
	"github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor/internal/metadata"
)

var processorCapabilities = consumer.Capabilities{MutatesData: true}

// NewFactory returns the factory for the rank_strategy processor.
func NewFactory() processor.Factory {
	return processor.NewFactory(
		metadata.Type,
		createDefaultConfig,
		processor.WithTraces(createTraces, metadata.TracesStability),
		processor.WithMetrics(createMetrics, metadata.MetricsStability),
		processor.WithLogs(createLogs, metadata.LogsStability),
	)
}

// createDefaultConfig mirrors the NeMo Lens library defaults: single_rank on
// the last rank, sample rate 1.0.
func createDefaultConfig() component.Config {
	return &Config{
		Strategy:        StrategySingleRank,
		ExportRank:      -1,
		SampleRate:      1.0,
		Keys:            steps.DefaultKeys(),
		OnMissingRank:   MissingRankKeep,
		KeepErrors:      true,
		KeepLogSeverity: "ERROR",
		Stragglers:      configoptional.Default(defaultStragglersConfig()),
	}
}

func createTraces(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	tp, _, err := newTracesProcessor(ctx, set, cfg.(*Config), next, clock.Wall())
	return tp, err
}

// newTracesProcessor is createTraces with the straggler buffer's clock
// injected, so that tests can decide steps without sleeping and look inside.
func newTracesProcessor(ctx context.Context, set processor.Settings, cfg *Config, next consumer.Traces, clk clock.Clock) (processor.Traces, *rankStrategyProcessor, error) {
	p, err := newRankStrategyProcessor(set, cfg, pipeline.SignalTraces)
	if err != nil {
		return nil, nil, err
	}
	err = p.enableStragglers(cfg, set, next, clk)
	if err != nil {
		return nil, nil, err
	}
	tp, err := processorhelper.NewTraces(ctx, set, cfg, next, p.processTraces,
		processorhelper.WithCapabilities(processorCapabilities),
		processorhelper.WithStart(p.start),
		processorhelper.WithShutdown(p.shutdown))
	return tp, p, err
}

func createMetrics(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Metrics) (processor.Metrics, error) {
	p, err := newRankStrategyProcessor(set, cfg.(*Config), pipeline.SignalMetrics)
	if err != nil {
		return nil, err
	}
	return processorhelper.NewMetrics(ctx, set, cfg, next, p.processMetrics,
		processorhelper.WithCapabilities(processorCapabilities),
		processorhelper.WithShutdown(p.shutdown))
}

func createLogs(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	p, err := newRankStrategyProcessor(set, cfg.(*Config), pipeline.SignalLogs)
	if err != nil {
		return nil, err
	}
	return processorhelper.NewLogs(ctx, set, cfg, next, p.processLogs,
		processorhelper.WithCapabilities(processorCapabilities),
		processorhelper.WithShutdown(p.shutdown))
}
