// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepsamplingprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor"

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"go.opentelemetry.io/collector/component"

	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// Config configures the step_sampling processor.
type Config struct {
	// SampleRate is the fraction of iterations kept, in [0,1]. Iteration i
	// of run r is kept when the first 8 bytes of sha256("r:i"), read as a
	// big-endian integer and shifted right by 11 bits, over 2^53, is below
	// SampleRate. 1 keeps every step.
	SampleRate float64 `mapstructure:"sample_rate"`

	// Every keeps the iterations divisible by it instead (10 keeps 0, 10,
	// 20, ...); 0 leaves it unused. It is an alternative to SampleRate: the
	// two cannot be combined.
	Every int64 `mapstructure:"every"`

	// RunIDKey is the resource attribute holding the run id that the sample
	// is drawn for; every rank of a run must carry the same value.
	RunIDKey string `mapstructure:"run_id_key"`

	// Keys: rank_keys (resources without a usable rank pass untouched) and
	// group_keys (with the run id and the rank, they tell one training
	// process from another: rank numbers are only unique within a run and
	// worker group), as rank_strategy and nemo_steps read them; the world
	// size and local rank are not used here.
	steps.Keys `mapstructure:",squash"`

	// Spans: step_span_names, the span covering one rank's step (a trace
	// root or a child of a run-long job span), and iteration_attribute.
	steps.Spans `mapstructure:",squash"`

	// Waits: span_wait, the longest a span waits for the step span that
	// tells its step (0: as long as decision_wait); then it is passed on
	// undecided (kept). step_sampling decides each step at its step span,
	// so decision_wait only stands in for an unset span_wait.
	steps.Waits `mapstructure:",squash"`

	// MaxBufferedSpans bounds the spans waiting for their step span; beyond
	// it the oldest are passed on undecided (kept).
	MaxBufferedSpans int `mapstructure:"max_buffered_spans"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// The configuration's errors. Each message wraps one of them with the value
// it got, so that it names the key and the fix while the tests match the
// kind with errors.Is. The step settings' errors are internal/steps'.
var (
	errSampleRate         = errors.New("sample_rate must be a fraction in [0,1] (0.01 keeps 1% of steps, 1 keeps every step)")
	errEvery              = errors.New("every must be 0 (unused) or a positive number of iterations (10 keeps 0, 10, 20, ...)")
	errSampleRateAndEvery = errors.New("are alternatives: set one of them and leave the other at its default (sample_rate: 1, every: 0)")
	errNoRunIDKey         = errors.New("run_id_key must name the resource attribute holding the run id, e.g. nemo.run.id")
	errMaxBufferedSpans   = errors.New("max_buffered_spans must be at least 1")
)

var _ component.Config = (*Config)(nil)

// Validate checks the configuration; errors name the offending key and say
// what would be accepted.
func (cfg *Config) Validate() error {
	var errs []error
	if math.IsNaN(cfg.SampleRate) || cfg.SampleRate < 0 || cfg.SampleRate > 1 {
		errs = append(errs, fmt.Errorf("%w, got %v", errSampleRate, cfg.SampleRate))
	}
	if cfg.Every < 0 {
		errs = append(errs, fmt.Errorf("%w, got %d", errEvery, cfg.Every))
	}
	if cfg.Every > 0 && cfg.SampleRate < 1 {
		errs = append(errs, fmt.Errorf("sample_rate (%v) and every (%d) %w", cfg.SampleRate, cfg.Every, errSampleRateAndEvery))
	}
	if strings.TrimSpace(cfg.RunIDKey) == "" {
		errs = append(errs, errNoRunIDKey)
	}
	errs = append(errs, cfg.Keys.Check(steps.Need{Rank: true}), cfg.Spans.Check(), cfg.Waits.Check())
	if cfg.MaxBufferedSpans < 1 {
		errs = append(errs, fmt.Errorf("%w, got %d", errMaxBufferedSpans, cfg.MaxBufferedSpans))
	}
	return errors.Join(errs...)
}

// keepsAll reports whether the configuration keeps every step, so that the
// processor can pass batches through untouched.
func (cfg *Config) keepsAll() bool {
	return cfg.SampleRate >= 1 && cfg.Every <= 1
}
