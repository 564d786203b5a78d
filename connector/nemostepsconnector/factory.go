package nemostepsconnector // import "github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector"

import (
	"context"
	"slices"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"

	"github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector/internal/metadata"
	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
)

// Defaults shared with rank_strategy's stragglers block. rank_strategy keeps
// its own copies unexported (defaultStragglersConfig and the group keys in
// its createDefaultConfig); these duplicate them until both read one
// exported list.
const (
	defaultDecisionWait        = 10 * time.Second
	defaultIterationAttribute  = "megatron.iteration"
	defaultRelativeThreshold   = 0.7
	defaultIndividualThreshold = 0.7
	defaultHistory             = 20
)

// defaultMaxOpenRankSteps holds a 10,000-rank job's steps for 100 steps
// (ten steps a second over decision_wait, while one rank is missing), about
// 160 MB at the ~160 bytes per open rank step README.md gives.
const defaultMaxOpenRankSteps = 1_000_000

// defaultStepSpanNames are Megatron-LM's per-iteration spans in its first
// and its newer span taxonomy.
func defaultStepSpanNames() []string {
	return []string{"megatron.train_step", "megatron.train.iteration"}
}

// defaultWaitSpans are Megatron-LM's communication spans in which a rank
// waits for its peers: the data-parallel gradient sync and the
// pipeline-parallel receives. Sends are not waits: they return once the
// data is handed over.
func defaultWaitSpans() []string {
	return []string{"megatron.grad_sync.*", "megatron.p2p.recv_*", "megatron.pp.recv_*"}
}

// defaultGroupKeys identify a run and, in NeMo-RL, the worker group within
// which ranks are numbered.
func defaultGroupKeys() []string {
	return []string{"nemo.run.id", "rl.worker_group"}
}

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
		StepSpanNames:       defaultStepSpanNames(),
		IterationAttribute:  defaultIterationAttribute,
		WaitSpans:           defaultWaitSpans(),
		RelativeThreshold:   defaultRelativeThreshold,
		IndividualThreshold: defaultIndividualThreshold,
		History:             defaultHistory,
		DecisionWait:        defaultDecisionWait,
		MaxOpenRankSteps:    defaultMaxOpenRankSteps,
		RankKeys:            slices.Clone(rankattr.DefaultRankKeys),
		WorldSizeKeys:       slices.Clone(rankattr.DefaultWorldSizeKeys),
		LocalRankKeys:       slices.Clone(rankattr.DefaultLocalRankKeys),
		GroupKeys:           defaultGroupKeys(),
	}
}

func createTracesToMetrics(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Traces, error) {
	return newConnector(set, cfg.(*Config), next, wallClock{})
}
