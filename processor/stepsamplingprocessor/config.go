// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepsamplingprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor"

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

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

	// RankKeys are the resource attributes holding the rank, first present
	// wins. Resources without a usable rank pass untouched.
	RankKeys []string `mapstructure:"rank_keys"`

	// GroupKeys are the resource attributes that, with the run id and the
	// rank, tell one training process from another: rank numbers are only
	// unique within a run and worker group.
	GroupKeys []string `mapstructure:"group_keys"`

	// Spans: step_span_names, the span covering one rank's step (a trace
	// root or a child of a run-long job span), and iteration_attribute.
	steps.Spans `mapstructure:",squash"`

	// SpanWait is the longest a span is held waiting for the step span that
	// tells its step; then it is passed on undecided (kept).
	SpanWait time.Duration `mapstructure:"span_wait"`

	// MaxBufferedSpans bounds the spans held; beyond it the oldest are
	// passed on undecided (kept).
	MaxBufferedSpans int `mapstructure:"max_buffered_spans"`

	// DecisionWait was renamed SpanWait: here it meant how long a span waits
	// for its step span, and decision_wait now means how long a step stays
	// open everywhere. Setting it fails at start naming span_wait.
	DecisionWait any `mapstructure:"decision_wait"`

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
	errs = append(errs,
		steps.CheckKeys("rank_keys", cfg.RankKeys, true),
		steps.CheckKeys("group_keys", cfg.GroupKeys, false),
		cfg.Check(),
		steps.RenamedToSpanWait(cfg.DecisionWait),
		steps.CheckSpanWait(cfg.SpanWait))
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
