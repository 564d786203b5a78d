// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemostepsprocessor"

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"

	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// Config configures the nemo_steps processor. The step, wait, score and
// rank identity settings are internal/steps', the same as rank_strategy's,
// so that both components agree on what a step, a rank and a straggler are.
type Config struct {
	// Settings: step_span_names, iteration_attribute, wait_spans,
	// relative_threshold, individual_threshold, history. A rank step is
	// counted as a straggler when either score is below its threshold.
	steps.Settings `mapstructure:",squash"`

	// Waits: decision_wait, the longest a step stays open from its first
	// step span, and span_wait, the longest a wait span waits for its step
	// span (0: as long as decision_wait).
	steps.Waits `mapstructure:",squash"`

	// Keys: rank_keys (the key found is the data point attribute the rank
	// is put under), world_size_keys (without them every step waits
	// decision_wait), local_rank_keys (put on the data points with
	// host.name) and group_keys (ranks are compared only within one group,
	// and the keys present are put on the data points).
	steps.Keys `mapstructure:",squash"`

	// Interval, when above 0, aggregates every rank's steps over this long
	// and emits, per rank and interval, the last, smallest and largest
	// value of each step metric instead of one point per rank per step.
	Interval time.Duration `mapstructure:"interval"`

	// Stalls, on unless enabled: false, finds stalled runs: when a run
	// counts as stalled (no rank completed a step for longer than
	// max(min_stall, stall_factor x the run's median step duration over its
	// last 20 steps), and which spans end a rank's run. Off, the processor
	// skips the detector's work on every span, not only its output.
	Stalls configoptional.Optional[StallsConfig] `mapstructure:"stalls"`

	// Goodput, on unless enabled: false, accounts where every run's
	// wall-clock time went (productive, straggler, startup, checkpoint load
	// and save, evaluation, stalled, lost progress, restart, other) and
	// emits it every interval and when the run ends. Off, the processor
	// skips its work on every span.
	Goodput configoptional.Optional[GoodputConfig] `mapstructure:"goodput"`

	// MaxOpenRankSteps bounds the rank steps (one rank's step span, with
	// its wait intervals) held in steps not decided yet. When it is reached
	// the oldest open step is decided early with the ranks it has.
	MaxOpenRankSteps int `mapstructure:"max_open_rank_steps"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// StallsConfig configures the stall detector (stalls.go).
type StallsConfig struct {
	// MinStall is the shortest silence (no rank of a run completing a
	// step) that makes the run stalled.
	MinStall time.Duration `mapstructure:"min_stall"`
	// StallFactor times the run's median step duration is the silence that
	// makes it stalled, when longer than min_stall.
	StallFactor float64 `mapstructure:"stall_factor"`
	// JobSpanNames are the run-long spans of a rank: once every rank's has
	// ended, the run is over and cannot stall.
	JobSpanNames []string `mapstructure:"job_span_names"`
}

// GoodputConfig configures the goodput accounting (goodput.go).
type GoodputConfig struct {
	// Interval is how often a running run's goodput is emitted (the
	// nemo.run.goodput record and the metrics); a run's last is emitted
	// when it ends.
	Interval time.Duration `mapstructure:"interval"`
	// CheckpointLoadSpanNames, CheckpointSaveSpanNames and
	// EvaluationSpanNames name the spans whose time is checkpoint loading,
	// checkpoint saving and evaluation: exact names, or prefixes ending in
	// "*".
	CheckpointLoadSpanNames []string `mapstructure:"checkpoint_load_span_names"`
	CheckpointSaveSpanNames []string `mapstructure:"checkpoint_save_span_names"`
	EvaluationSpanNames     []string `mapstructure:"evaluation_span_names"`
	// JobSpanNames are a rank's run-long spans: once every rank's has
	// ended, the run is over (as stalls::job_span_names).
	JobSpanNames []string `mapstructure:"job_span_names"`
}

// The configuration's errors. Each message wraps one of them with the value
// it got, so that it names the key and the fix while the tests match the
// kind with errors.Is. The step settings' errors are internal/steps'.
var (
	errMinStall         = errors.New("min_stall must be positive (the shortest silence that counts as a stall, e.g. 60s)")
	errStallFactor      = errors.New("stall_factor must be 0 or more (a stall is longer than stall_factor x the median step)")
	errInterval         = errors.New("interval must be 0 (one point per rank per step) or positive (aggregate per rank over that long)")
	errMaxOpenRankSteps = errors.New("max_open_rank_steps must be at least 1")
	errGoodputInterval  = errors.New("interval must be positive (how often a running run's goodput is emitted, e.g. 5m)")
)

var _ component.Config = (*StallsConfig)(nil)

// Validate checks the stalls block; the collector calls it only when the
// block is enabled.
func (s *StallsConfig) Validate() error {
	var errs []error
	if s.MinStall <= 0 {
		errs = append(errs, fmt.Errorf("%w, got %s", errMinStall, s.MinStall))
	}
	if s.StallFactor < 0 {
		errs = append(errs, fmt.Errorf("%w, got %g", errStallFactor, s.StallFactor))
	}
	return errors.Join(errs...)
}

var _ component.Config = (*GoodputConfig)(nil)

// Validate checks the goodput block; the collector calls it only when the
// block is enabled.
func (g *GoodputConfig) Validate() error {
	var errs []error
	if g.Interval <= 0 {
		errs = append(errs, fmt.Errorf("%w, got %s", errGoodputInterval, g.Interval))
	}
	for key, list := range map[string][]string{
		"checkpoint_load_span_names": g.CheckpointLoadSpanNames,
		"checkpoint_save_span_names": g.CheckpointSaveSpanNames,
		"evaluation_span_names":      g.EvaluationSpanNames,
	} {
		if _, err := steps.ParsePatterns(list); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}
	}
	errs = append(errs, steps.CheckKeys("job_span_names", g.JobSpanNames, false))
	return errors.Join(errs...)
}

var _ component.Config = (*Config)(nil)

// Validate checks the configuration; every error names the key and says
// what would be accepted.
func (cfg *Config) Validate() error {
	errs := []error{cfg.Settings.Check(), cfg.Waits.Check(), cfg.Keys.Check(steps.Need{Rank: true})}
	if cfg.Interval < 0 {
		errs = append(errs, fmt.Errorf("%w, got %s", errInterval, cfg.Interval))
	}
	if cfg.MaxOpenRankSteps < 1 {
		errs = append(errs, fmt.Errorf("%w, got %d", errMaxOpenRankSteps, cfg.MaxOpenRankSteps))
	}
	return errors.Join(errs...)
}
