// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsconnector // import "github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"

	"github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector/internal/metadata"
	"github.com/nemo-lens/otelcol-nemo/internal/clock"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// defaultMaxOpenRankSteps holds a 10,000-rank job's steps for 100 steps
// (ten steps a second over decision_wait, while one rank is missing), about
// 160 MB at the ~160 bytes per open rank step README.md gives.
const defaultMaxOpenRankSteps = 1_000_000

// NewFactory returns the factory for the nemo_steps connector.
func NewFactory() connector.Factory {
	return connector.NewFactory(
		metadata.Type,
		createDefaultConfig,
		connector.WithTracesToMetrics(createTracesToMetrics, metadata.TracesToMetricsStability),
	)
}

func createDefaultConfig() component.Config {
	return &Config{
		Settings:         steps.DefaultSettings(),
		Waits:            steps.DefaultWaits(),
		Keys:             steps.DefaultKeys(),
		MaxOpenRankSteps: defaultMaxOpenRankSteps,
	}
}

func createTracesToMetrics(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Traces, error) {
	return newConnector(set, cfg.(*Config), next, clock.Wall())
}
