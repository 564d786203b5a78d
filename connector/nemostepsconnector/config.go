package nemostepsconnector // import "github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector"

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
)

// Config configures the nemo_steps connector. The step, wait and score keys
// and their defaults are those of rank_strategy's stragglers block, and the
// rank identity keys those of rank_strategy, so that both components agree
// on what a step, a rank and a straggler are.
type Config struct {
	// StepSpanNames are the names of the span that covers one rank's step
	// (Megatron-LM: megatron.train_step, or megatron.train.iteration in its
	// newer span taxonomy).
	StepSpanNames []string `mapstructure:"step_span_names"`

	// IterationAttribute is the step span attribute holding the iteration
	// number (an int or a decimal string), which lines up the ranks' steps.
	IterationAttribute string `mapstructure:"iteration_attribute"`

	// WaitSpans are the names of the spans in which a rank waits for the
	// others (gradient sync, pipeline receives): exact names, or prefixes
	// ending in "*". A rank's busy time on a step is the step's duration
	// minus the time covered by these spans that start within the step.
	WaitSpans []string `mapstructure:"wait_spans"`

	// RelativeThreshold: a rank step is counted as a straggler when the
	// step's fastest busy time over this rank's is below this, in [0,1]; 0
	// switches the relative score off for the count.
	RelativeThreshold float64 `mapstructure:"relative_threshold"`

	// IndividualThreshold: a rank step is counted as a straggler when the
	// rank's best busy time over its last History steps over this step's is
	// below this, in [0,1]; 0 switches the individual score off for the count.
	IndividualThreshold float64 `mapstructure:"individual_threshold"`

	// History is the number of a rank's most recent steps (this one
	// included) whose best busy time the individual score compares with.
	History int `mapstructure:"history"`

	// DecisionWait is the longest a step stays open, from the first step
	// span of that (run, group, iteration) seen from any rank. A step is
	// decided earlier, at the next tick, once every rank of its world has
	// reported its step span.
	DecisionWait time.Duration `mapstructure:"decision_wait"`

	// Interval, when above 0, aggregates every rank's steps over this long
	// and emits, per rank and interval, the last, smallest and largest
	// value of each step metric instead of one point per rank per step.
	Interval time.Duration `mapstructure:"interval"`

	// MaxOpenRankSteps bounds the rank steps (one rank's step span, with
	// its wait intervals) held in steps not decided yet. When it is reached
	// the oldest open step is decided early with the ranks it has.
	MaxOpenRankSteps int `mapstructure:"max_open_rank_steps"`

	// RankKeys are the resource attributes holding the rank, first present
	// wins. The key found is the data point attribute the rank is put under.
	RankKeys []string `mapstructure:"rank_keys"`

	// WorldSizeKeys are the resource attributes holding the world size,
	// first present wins: a step is complete once that many ranks reported.
	// Without them every step waits decision_wait.
	WorldSizeKeys []string `mapstructure:"world_size_keys"`

	// LocalRankKeys are the resource attributes holding the rank within its
	// node, first present wins; put on the data points with host.name.
	LocalRankKeys []string `mapstructure:"local_rank_keys"`

	// GroupKeys are the resource attributes that together identify a run and
	// worker group; ranks are compared only within one group, and the keys
	// present are put on the data points.
	GroupKeys []string `mapstructure:"group_keys"`

	// prevent unkeyed literal initialization
	_ struct{}
}

var _ component.Config = (*Config)(nil)

// Validate checks the configuration; every error names the key and says
// what would be accepted.
func (cfg *Config) Validate() error {
	var errs []error
	if len(cfg.StepSpanNames) == 0 {
		errs = append(errs, errors.New("step_span_names must list at least one span name, e.g. [megatron.train_step, megatron.train.iteration]"))
	}
	errs = append(errs,
		validateKeys("step_span_names", cfg.StepSpanNames, false),
		validateKeys("rank_keys", cfg.RankKeys, true),
		validateKeys("world_size_keys", cfg.WorldSizeKeys, false),
		validateKeys("local_rank_keys", cfg.LocalRankKeys, false),
		validateKeys("group_keys", cfg.GroupKeys, false),
		validateScoreThreshold("relative_threshold", cfg.RelativeThreshold),
		validateScoreThreshold("individual_threshold", cfg.IndividualThreshold))
	if strings.TrimSpace(cfg.IterationAttribute) == "" {
		errs = append(errs, errors.New("iteration_attribute must not be empty; the default is megatron.iteration"))
	}
	if _, err := stepbusy.ParsePatterns(cfg.WaitSpans); err != nil {
		errs = append(errs, fmt.Errorf("wait_spans: %w", err))
	}
	if cfg.History < 1 {
		errs = append(errs, fmt.Errorf("history must be at least 1 step, got %d", cfg.History))
	}
	if cfg.DecisionWait <= 0 {
		errs = append(errs, fmt.Errorf("decision_wait must be positive (a step is decided at the latest this long after its first step span), got %s", cfg.DecisionWait))
	}
	if cfg.Interval < 0 {
		errs = append(errs, fmt.Errorf("interval must be 0 (one point per rank per step) or positive (aggregate per rank over that long), got %s", cfg.Interval))
	}
	if cfg.MaxOpenRankSteps < 1 {
		errs = append(errs, fmt.Errorf("max_open_rank_steps must be at least 1, got %d", cfg.MaxOpenRankSteps))
	}
	return errors.Join(errs...)
}

func validateScoreThreshold(key string, v float64) error {
	if math.IsNaN(v) || v < 0 || v > 1 {
		return fmt.Errorf("%s must be a score in [0,1] (the faster time over this rank's; 0 switches it off), got %v", key, v)
	}
	return nil
}

func validateKeys(key string, list []string, required bool) error {
	if required && len(list) == 0 {
		return fmt.Errorf("%s must list at least one attribute key, e.g. [nv.dl.rank, dl.rank]", key)
	}
	for i, k := range list {
		if strings.TrimSpace(k) == "" {
			return fmt.Errorf("%s[%d] must not be empty", key, i)
		}
	}
	return nil
}
