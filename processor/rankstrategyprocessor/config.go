// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor"

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// Strategy names a rule for choosing which ranks' telemetry is kept. The names
// are the values NeMo Lens accepted in NEMO_LENS_EXPORT_STRATEGY, plus "ranks".
type Strategy string

const (
	// StrategySingleRank keeps one rank per run and group (export_rank).
	StrategySingleRank Strategy = "single_rank"
	// StrategyAllRanks keeps every rank.
	StrategyAllRanks Strategy = "all_ranks"
	// StrategySampled keeps a deterministic md5-based fraction of ranks (sample_rate).
	StrategySampled Strategy = "sampled"
	// StrategyFirstRankPerNode keeps ranks whose local rank is 0.
	StrategyFirstRankPerNode Strategy = "first_rank_per_node"
	// StrategyRanks keeps an explicit list of ranks and ranges (ranks).
	StrategyRanks Strategy = "ranks"
)

var strategies = []Strategy{StrategySingleRank, StrategyAllRanks, StrategySampled, StrategyFirstRankPerNode, StrategyRanks}

// The configuration's errors. Each message wraps one of them with the value
// it got (or, for a removed key, what replaces it), so that it names the key
// and the fix while the tests match the kind with errors.Is.
var (
	errUnknownStrategy = fmt.Errorf("strategy must be one of %s", strategyNames())
	errOnMissingRank   = errors.New("on_missing_rank must be keep or drop")
	errExportRank      = errors.New("export_rank must be -1 (last rank) or a rank >= 0")
	errSampleRate      = errors.New("sample_rate must be in [0,1]")
	errNoRanks         = errors.New(`ranks must list at least one rank when strategy is "ranks", e.g. "0,7,64-71"`)
	errSeverity        = errors.New("must be one of TRACE, DEBUG, INFO, WARN, ERROR, FATAL (optionally suffixed 2-4)")

	errStepSpanNameReplaced = errors.New("step_span_name was replaced by step_span_names, a list")
	errThresholdRemoved     = errors.New("was removed: stragglers are now scored on busy time; " +
		"set relative_threshold and individual_threshold (scores in [0,1], default 0.7) instead")
	errMaxRanksPerStep   = errors.New("max_ranks_per_step must be at least 1")
	errMaxBufferedSpans  = errors.New("max_buffered_spans must be at least 1")
	errDecisionCacheSize = errors.New("decision_cache_size must be at least 1")
	errProgressInterval  = errors.New("progress_interval must be positive (a summarized rank silent this long gets a progress beat), e.g. 1s")
)

func strategyNames() string {
	names := make([]string, len(strategies))
	for i, known := range strategies {
		names[i] = string(known)
	}
	return strings.Join(names, ", ")
}

// Validate reports a strategy this processor does not know.
func (s Strategy) Validate() error {
	if slices.Contains(strategies, s) {
		return nil
	}
	return fmt.Errorf("%w, got %q", errUnknownStrategy, s)
}

// MissingRankAction says what happens to a resource the strategy cannot place.
type MissingRankAction string

const (
	// MissingRankKeep passes resources without a usable rank through.
	MissingRankKeep MissingRankAction = "keep"
	// MissingRankDrop drops resources without a usable rank.
	MissingRankDrop MissingRankAction = "drop"
)

// Validate reports an action other than keep and drop.
func (a MissingRankAction) Validate() error {
	switch a {
	case MissingRankKeep, MissingRankDrop:
		return nil
	default:
		return fmt.Errorf("%w, got %q", errOnMissingRank, a)
	}
}

// Config configures the rank_strategy processor.
type Config struct {
	// Strategy selects which ranks are kept: single_rank, all_ranks, sampled,
	// first_rank_per_node or ranks.
	Strategy Strategy `mapstructure:"strategy"`

	// ExportRank is the rank single_rank keeps in every run and group. -1
	// means the last rank, world size - 1, read from the world-size attribute.
	ExportRank int64 `mapstructure:"export_rank"`

	// SampleRate is the fraction of ranks sampled keeps, in [0,1]. Rank r is
	// kept when int(md5(str(r)).hexdigest(), 16) % 10000 / 10000.0 < SampleRate.
	SampleRate float64 `mapstructure:"sample_rate"`

	// Ranks is the list the ranks strategy keeps: comma-separated ranks and
	// inclusive ranges, e.g. "0,7,64-71".
	Ranks string `mapstructure:"ranks"`

	// Keys: rank_keys, world_size_keys (used by single_rank with
	// export_rank -1, and to know when a step is complete), local_rank_keys
	// (used by first_rank_per_node) and group_keys (rank numbers are only
	// meaningful within one run and worker group), each first present wins.
	steps.Keys `mapstructure:",squash"`

	// OnMissingRank is keep or drop: what to do with resources that carry no
	// usable rank identity (not training telemetry, or a garbage value).
	OnMissingRank MissingRankAction `mapstructure:"on_missing_rank"`

	// KeepErrors keeps, from ranks the strategy drops, spans with status
	// ERROR, spans marked nemo.span.truncated=true and log records at or above
	// KeepLogSeverity, each marked with the reason it was kept.
	KeepErrors bool `mapstructure:"keep_errors"`

	// KeepLogSeverity is the lowest log severity kept from dropped ranks when
	// KeepErrors is on: TRACE, DEBUG, INFO, WARN, ERROR or FATAL, optionally
	// with a 2-4 suffix (ERROR2).
	KeepLogSeverity string `mapstructure:"keep_log_severity"`

	// Stragglers, when present (or enabled: true), holds the step subtrees
	// of the ranks the strategy drops until their step is decided and keeps
	// a rank's step when its busy time (step duration minus time spent
	// waiting for the other ranks) was markedly longer than the fastest
	// rank's on that step, or than its own recent steps'. Traces only.
	Stragglers configoptional.Optional[StragglersConfig] `mapstructure:"stragglers"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// StragglersConfig configures step-level straggler retention.
type StragglersConfig struct {
	// Waits: decision_wait, the longest a step stays open from the first
	// step span of that (run, group, iteration) seen from any rank (a step
	// is decided earlier, at the next tick, once every rank of its world
	// has reported its step span); and span_wait, the longest a held span
	// not yet tied to a step waits from its own arrival (0: as long as
	// decision_wait).
	steps.Waits `mapstructure:",squash"`

	// Settings: step_span_names (the span that roots one rank's step
	// subtree), iteration_attribute, wait_spans (a rank's busy time on a
	// step is the step's duration minus the time covered by these spans
	// among its descendants), relative_threshold, individual_threshold and
	// history: a held rank is a straggler on a step when either score is
	// below its threshold.
	steps.Settings `mapstructure:",squash"`

	// MaxRanksPerStep caps the stragglers kept per step, worst score first.
	MaxRanksPerStep int `mapstructure:"max_ranks_per_step"`

	// MaxBufferedSpans bounds the spans held. When it is reached the oldest
	// steps are decided early with what has been seen so far, and then, if
	// still needed, the oldest spans not yet tied to a step are dropped.
	MaxBufferedSpans int `mapstructure:"max_buffered_spans"`

	// DecisionCacheSize is how many decided steps are remembered so that
	// spans arriving after their step's decision follow it.
	DecisionCacheSize int `mapstructure:"decision_cache_size"`

	// Summarize is for an agent in front of gateways (configs/agent.yaml):
	// for every rank the strategy drops it sends the gateway a step summary
	// per rank-step, the envelopes of its spans outside the steps and
	// progress beats (internal/stepsummary's contract), so that the
	// gateway judges every rank of the run at a small fraction of the
	// spans' cost; a step is decided once every rank of its run this agent
	// hears from reported it; a dropped rank's step is kept as a straggler
	// on the scores among this node's ranks.
	Summarize bool `mapstructure:"summarize"`

	// ProgressInterval: with summarize, a rank that completed no step for
	// this long gets a progress beat (its latest ended span) when it made
	// progress, at most one per interval.
	ProgressInterval time.Duration `mapstructure:"progress_interval"`

	// StepSpanName was replaced by StepSpanNames; setting it fails at start
	// with a message naming the replacement.
	StepSpanName string `mapstructure:"step_span_name"`

	// Threshold (a multiple of the step's median wall duration) was replaced
	// by RelativeThreshold and IndividualThreshold on busy time; setting it
	// fails at start with a message naming the replacements.
	Threshold *float64 `mapstructure:"threshold"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// Straggler defaults. max_buffered_spans is sized for 100,000 spans/s held
// for up to two decision waits (a child waits for its step span, then the
// step waits): 2,000,000 spans; README.md gives the measured bytes per span.
// The wait, the step settings and the thresholds are internal/steps'.
const (
	defaultMaxRanksPerStep   = 4
	defaultMaxBufferedSpans  = 2_000_000
	defaultDecisionCacheSize = 10_000
	defaultProgressInterval  = time.Second
)

func defaultStragglersConfig() StragglersConfig {
	return StragglersConfig{
		Waits:             steps.DefaultWaits(),
		Settings:          steps.DefaultSettings(),
		MaxRanksPerStep:   defaultMaxRanksPerStep,
		MaxBufferedSpans:  defaultMaxBufferedSpans,
		DecisionCacheSize: defaultDecisionCacheSize,
		ProgressInterval:  defaultProgressInterval,
	}
}

var _ component.Config = (*StragglersConfig)(nil)

// Validate checks the stragglers block; the collector calls it only when the
// block is enabled.
func (cfg *StragglersConfig) Validate() error {
	var errs []error
	if cfg.StepSpanName != "" {
		errs = append(errs, fmt.Errorf("%w: set step_span_names: [%q]", errStepSpanNameReplaced, cfg.StepSpanName))
	}
	if cfg.Threshold != nil {
		errs = append(errs, fmt.Errorf("threshold (a multiple of the median step duration, got %v) %w", *cfg.Threshold, errThresholdRemoved))
	}
	errs = append(errs, cfg.Waits.Check(), cfg.Settings.Check())
	if cfg.MaxRanksPerStep < 1 {
		errs = append(errs, fmt.Errorf("%w, got %d", errMaxRanksPerStep, cfg.MaxRanksPerStep))
	}
	if cfg.MaxBufferedSpans < 1 {
		errs = append(errs, fmt.Errorf("%w, got %d", errMaxBufferedSpans, cfg.MaxBufferedSpans))
	}
	if cfg.DecisionCacheSize < 1 {
		errs = append(errs, fmt.Errorf("%w, got %d", errDecisionCacheSize, cfg.DecisionCacheSize))
	}
	if cfg.Summarize && cfg.ProgressInterval <= 0 {
		errs = append(errs, fmt.Errorf("%w, got %s", errProgressInterval, cfg.ProgressInterval))
	}
	return errors.Join(errs...)
}

var _ component.Config = (*Config)(nil)

// Validate checks the configuration; errors name the offending key.
func (cfg *Config) Validate() error {
	errs := []error{cfg.Strategy.Validate()}
	if cfg.ExportRank < -1 {
		errs = append(errs, fmt.Errorf("%w, got %d", errExportRank, cfg.ExportRank))
	}
	if math.IsNaN(cfg.SampleRate) || cfg.SampleRate < 0 || cfg.SampleRate > 1 {
		errs = append(errs, fmt.Errorf("%w, got %v", errSampleRate, cfg.SampleRate))
	}
	if strings.TrimSpace(cfg.Ranks) == "" {
		if cfg.Strategy == StrategyRanks {
			errs = append(errs, errNoRanks)
		}
	} else if _, err := parseRankList(cfg.Ranks); err != nil {
		errs = append(errs, fmt.Errorf("ranks: %w", err))
	}
	needRank := cfg.Strategy != StrategyFirstRankPerNode
	needWorldSize := cfg.Strategy == StrategySingleRank && cfg.ExportRank == -1
	needLocalRank := cfg.Strategy == StrategyFirstRankPerNode
	errs = append(errs,
		cfg.Check(steps.Need{Rank: needRank, WorldSize: needWorldSize, LocalRank: needLocalRank}),
		cfg.OnMissingRank.Validate(),
	)
	if _, err := parseSeverity(cfg.KeepLogSeverity); err != nil {
		errs = append(errs, fmt.Errorf("keep_log_severity: %w", err))
	}
	return errors.Join(errs...)
}

// severityBases maps a severity name to the first number of its range in the
// OpenTelemetry log data model (ERROR is 17..20, ERROR2 is 18, ...).
var severityBases = []struct {
	name string
	base plog.SeverityNumber
}{
	{"TRACE", plog.SeverityNumberTrace},
	{"DEBUG", plog.SeverityNumberDebug},
	{"INFO", plog.SeverityNumberInfo},
	{"WARNING", plog.SeverityNumberWarn},
	{"WARN", plog.SeverityNumberWarn},
	{"ERROR", plog.SeverityNumberError},
	{"CRITICAL", plog.SeverityNumberFatal},
	{"FATAL", plog.SeverityNumberFatal},
}

// parseSeverity reads a severity name such as "ERROR", "warn" or "FATAL2".
// WARNING and CRITICAL, Python logging's names, are accepted as WARN and FATAL.
func parseSeverity(s string) (plog.SeverityNumber, error) {
	if sn, ok := severityFromText(s); ok {
		return sn, nil
	}
	return plog.SeverityNumberUnspecified, fmt.Errorf("%w, got %q", errSeverity, s)
}

// severityFromText is parseSeverity without the error, for the severity text
// of log records that carry no severity number. It does not allocate.
func severityFromText(s string) (plog.SeverityNumber, bool) {
	s = strings.TrimSpace(s)
	for _, b := range severityBases {
		if len(s) < len(b.name) || !strings.EqualFold(s[:len(b.name)], b.name) {
			continue
		}
		switch suffix := s[len(b.name):]; suffix {
		case "":
			return b.base, true
		case "2", "3", "4":
			return b.base + plog.SeverityNumber(suffix[0]-'1'), true
		}
	}
	return plog.SeverityNumberUnspecified, false
}
