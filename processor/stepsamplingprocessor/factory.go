// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepsamplingprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/clock"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
	"github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor/internal/metadata"
)

// defaultMaxBufferedSpans holds ten seconds of a 100,000 spans/s job. The
// default span_wait, steps.DefaultDecisionWait, covers a step's duration
// plus an SDK export interval (5s by default), the longest a child normally
// precedes its step span; a span that waits longer is passed on, not lost.
const defaultMaxBufferedSpans = 1_000_000

// NewFactory returns the factory for the step_sampling processor.
func NewFactory() processor.Factory {
	return processor.NewFactory(
		metadata.Type,
		createDefaultConfig,
		processor.WithTraces(createTraces, metadata.TracesStability),
	)
}

// createDefaultConfig keeps every step: adding the processor changes
// nothing until sample_rate or every is set. Rank and group keys and the
// step spans are rank_strategy's, so that both tell the same processes and
// steps apart.
func createDefaultConfig() component.Config {
	return &Config{
		SampleRate:       1,
		RunIDKey:         attrkey.RunID,
		Keys:             steps.DefaultKeys(),
		Spans:            steps.DefaultSpans(),
		Waits:            steps.DefaultWaits(),
		MaxBufferedSpans: defaultMaxBufferedSpans,
	}
}

func createTraces(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	tp, _, err := newTracesProcessor(ctx, set, cfg.(*Config), next, clock.Wall())
	return tp, err
}

// newTracesProcessor is createTraces with the clock injected, so that tests
// expire held spans without sleeping and can look inside.
func newTracesProcessor(ctx context.Context, set processor.Settings, cfg *Config, next consumer.Traces, clk clock.Clock) (processor.Traces, *stepSamplingProcessor, error) {
	p, err := newStepSamplingProcessor(set, cfg, next, clk)
	if err != nil {
		return nil, nil, err
	}
	tp, err := processorhelper.NewTraces(ctx, set, cfg, next, p.processTraces,
		// Keeping every step changes nothing: the pipeline need not copy
		// batches for this processor then.
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: !cfg.keepsAll()}),
		processorhelper.WithStart(p.start),
		processorhelper.WithShutdown(p.shutdown))
	return tp, p, err
}
