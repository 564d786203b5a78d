package nemostepsconnector // import "github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector"

import (
	"context"
	"slices"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"

	"github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector/internal/metadata"
	"github.com/nemo-lens/otelcol-nemo/internal/clock"
	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
)

// Scoring defaults, the same as rank_strategy's stragglers block. The step
// span names, iteration attribute, wait spans and group keys come from
// internal/stepbusy and internal/rankattr, which rank_strategy reads too.
const (
	defaultDecisionWait        = 10 * time.Second
	defaultRelativeThreshold   = 0.7
	defaultIndividualThreshold = 0.7
	defaultHistory             = 20
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
		StepSpanNames:       stepbusy.DefaultStepSpanNames(),
		IterationAttribute:  stepbusy.DefaultIterationAttribute,
		WaitSpans:           stepbusy.DefaultWaitSpans(),
		RelativeThreshold:   defaultRelativeThreshold,
		IndividualThreshold: defaultIndividualThreshold,
		History:             defaultHistory,
		DecisionWait:        defaultDecisionWait,
		MaxOpenRankSteps:    defaultMaxOpenRankSteps,
		RankKeys:            slices.Clone(rankattr.DefaultRankKeys),
		WorldSizeKeys:       slices.Clone(rankattr.DefaultWorldSizeKeys),
		LocalRankKeys:       slices.Clone(rankattr.DefaultLocalRankKeys),
		GroupKeys:           slices.Clone(rankattr.DefaultGroupKeys),
	}
}

func createTracesToMetrics(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Traces, error) {
	return newConnector(set, cfg.(*Config), next, clock.Wall())
}
