// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsconnector // import "github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector/internal/metadata"
	"github.com/nemo-lens/otelcol-nemo/internal/clock"
	"github.com/nemo-lens/otelcol-nemo/internal/sharedcomponent"
	"github.com/nemo-lens/otelcol-nemo/internal/stall"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// defaultMaxOpenRankSteps holds a 10,000-rank job's steps for 100 steps
// (ten steps a second over decision_wait, while one rank is missing), about
// 160 MB at the ~160 bytes per open rank step README.md gives.
const defaultMaxOpenRankSteps = 1_000_000

// NewFactory returns the factory for the nemo_steps connector: traces to
// metrics (the step metrics and the stall gauges) and traces to logs (the
// stall records). Both signal pairs of one nemo_steps id share one
// connector: the stall records and gauges come from the same state as the
// step metrics, and a job's spans are read once.
func NewFactory() connector.Factory { return newFactory(clock.Wall()) }

// newFactory is NewFactory on clk, so that tests decide steps and judge
// stalls without sleeping.
func newFactory(clk clock.Clock) connector.Factory {
	// Shut down with its first half: the collector shuts a connector down
	// before the pipelines it feeds, so when the first half goes both
	// halves' pipelines still take the last points and records; by the
	// last half's turn the first one's exporters may be gone.
	shared := sharedcomponent.NewMap[component.ID, *stepsConnector](sharedcomponent.WithFirst)
	create := func(set connector.Settings, cfg component.Config, attach func(*stepsConnector)) (connector.Traces, error) {
		comp, err := shared.Acquire(set.ID, func() (*stepsConnector, error) { return newConnector(set, cfg.(*Config), clk) })
		if err != nil {
			return nil, err
		}
		c := comp.Unwrap()
		attach(c)
		// The collector sends the traces to each half: the first half
		// created reads them, the other only starts and stops the shared
		// connector.
		return &half{Component: comp, reads: c.readers.Add(1) == 1}, nil
	}
	return connector.NewFactory(
		metadata.Type,
		createDefaultConfig,
		connector.WithTracesToMetrics(func(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Traces, error) {
			return create(set, cfg, func(c *stepsConnector) { c.next = next })
		}, metadata.TracesToMetricsStability),
		connector.WithTracesToLogs(func(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Logs) (connector.Traces, error) {
			return create(set, cfg, func(c *stepsConnector) { c.nextLogs = next })
		}, metadata.TracesToLogsStability),
	)
}

func createDefaultConfig() component.Config {
	return &Config{
		Settings: steps.DefaultSettings(),
		Waits:    steps.DefaultWaits(),
		Keys:     steps.DefaultKeys(),
		// Some: on when the block is absent; enabled: false turns it off.
		Stalls: configoptional.Some(StallsConfig{
			MinStall:     stall.DefaultMinStall,
			StallFactor:  stall.DefaultFactor,
			JobSpanNames: defaultJobSpanNames(),
		}),
		Goodput: configoptional.Some(GoodputConfig{
			Interval:                defaultGoodputInterval,
			CheckpointLoadSpanNames: []string{"megatron.checkpoint.load*", "megatron.load_checkpoint"},
			CheckpointSaveSpanNames: []string{"megatron.checkpoint.save*", "megatron.checkpoint.exposed_save*", "megatron.save_checkpoint"},
			EvaluationSpanNames:     []string{"megatron.evaluate*", "megatron.eval.*"},
			JobSpanNames:            defaultJobSpanNames(),
		}),
		MaxOpenRankSteps: defaultMaxOpenRankSteps,
	}
}

// defaultGoodputInterval is how often a running run's goodput is emitted.
const defaultGoodputInterval = 5 * time.Minute

// defaultJobSpanNames are Megatron-LM's run-long spans (both taxonomies)
// and NeMo Lens's workload span.
func defaultJobSpanNames() []string {
	return []string{"megatron.pretrain", "megatron.train", "workload"}
}

// half is one signal pair's view of the shared connector.
type half struct {
	*sharedcomponent.Component[*stepsConnector]
	reads bool
}

var _ connector.Traces = (*half)(nil)

func (*half) Capabilities() consumer.Capabilities { return consumer.Capabilities{MutatesData: false} }

func (h *half) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if !h.reads {
		return nil
	}
	return h.Unwrap().ConsumeTraces(ctx, td)
}
