// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsconnector // import "github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"

	"github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector/internal/metadata"
	"github.com/nemo-lens/otelcol-nemo/internal/clock"
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
// connector (shared.go).
func NewFactory() connector.Factory { return newFactory(clock.Wall()) }

// newFactory is NewFactory on clk, so that tests decide steps and judge
// stalls without sleeping.
func newFactory(clk clock.Clock) connector.Factory {
	instances := newSharedConnectors(clk)
	return connector.NewFactory(
		metadata.Type,
		createDefaultConfig,
		connector.WithTracesToMetrics(instances.createTracesToMetrics, metadata.TracesToMetricsStability),
		connector.WithTracesToLogs(instances.createTracesToLogs, metadata.TracesToLogsStability),
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
		MaxOpenRankSteps: defaultMaxOpenRankSteps,
	}
}

// defaultJobSpanNames are Megatron-LM's run-long spans (both taxonomies)
// and NeMo Lens's workload span.
func defaultJobSpanNames() []string {
	return []string{"megatron.pretrain", "megatron.train", "workload"}
}

func (s *sharedConnectors) createTracesToMetrics(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Traces, error) {
	return s.get(set, cfg.(*Config), func(c *stepsConnector) { c.next = next })
}

func (s *sharedConnectors) createTracesToLogs(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Logs) (connector.Traces, error) {
	return s.get(set, cfg.(*Config), func(c *stepsConnector) { c.nextLogs = next })
}
