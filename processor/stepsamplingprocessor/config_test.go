// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepsamplingprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"

	"github.com/nemo-lens/otelcol-nemo/internal/steps"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/configtest"
	"github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor/internal/metadata"
)

func TestLoadConfig(t *testing.T) {
	withDefaults := func(edit func(*Config)) *Config {
		cfg := createDefaultConfig().(*Config)
		edit(cfg)
		return cfg
	}
	tests := []struct {
		name    string
		want    *Config
		wantErr error
	}{
		{name: "", want: withDefaults(func(*Config) {})},
		{name: "one_percent", want: withDefaults(func(c *Config) { c.SampleRate = 0.01 })},
		{name: "every_10", want: withDefaults(func(c *Config) { c.Every = 10 })},
		{name: "full", want: withDefaults(func(c *Config) {
			c.SampleRate = 0.05
			c.RunIDKey = "slurm.job.id"
			c.RankKeys = []string{"my.rank"}
			c.GroupKeys = []string{"slurm.job.id"}
			c.StepSpanNames = []string{"train_step"}
			c.IterationAttribute = "step"
			c.SpanWait = 30 * time.Second
			c.MaxBufferedSpans = 5000
		})},
		{name: "sample_rate_too_high", wantErr: errSampleRate},
		{name: "sample_rate_negative", wantErr: errSampleRate},
		{name: "every_negative", wantErr: errEvery},
		{name: "both", wantErr: errSampleRateAndEvery},
		{name: "no_step_span_names", wantErr: steps.ErrNoStepSpanNames},
		{name: "empty_step_span_name", wantErr: steps.ErrEmptyKey},
		{name: "no_rank_keys", wantErr: steps.ErrNoKeys},
		{name: "empty_run_id_key", wantErr: errNoRunIDKey},
		{name: "empty_iteration_attribute", wantErr: steps.ErrNoIterationAttribute},
		// The waits as in rank_strategy and nemo_steps: without span_wait,
		// a span waits decision_wait.
		{name: "decision_wait_only", want: withDefaults(func(c *Config) { c.DecisionWait = 30 * time.Second })},
		{name: "bad_span_wait", wantErr: steps.ErrNegativeSpanWait},
		{name: "bad_max_buffered_spans", wantErr: errMaxBufferedSpans},
	}
	for _, tt := range tests {
		id := component.NewIDWithName(metadata.Type, tt.name)
		t.Run(id.String(), func(t *testing.T) {
			cfg := createDefaultConfig()
			err := configtest.Load(t, id, cfg)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg)
		})
	}
}

// The messages README.md quotes (internal/steps tests the text of the
// step settings' errors, decision_wait's renaming among them).
func TestErrorMessagesNameTheKeyAndTheFix(t *testing.T) {
	for name, want := range map[string]string{
		"sample_rate_too_high": "sample_rate must be a fraction in [0,1] (0.01 keeps 1% of steps, 1 keeps every step), got 1.5",
		"every_negative":       "every must be 0 (unused) or a positive number of iterations (10 keeps 0, 10, 20, ...), got -10",
		"both":                 "sample_rate (0.1) and every (10) are alternatives: set one of them and leave the other at its default (sample_rate: 1, every: 0)",
		"no_step_span_names":   "step_span_names must list at least one span name, e.g. [megatron.train_step, megatron.train.iteration]",
	} {
		t.Run(name, func(t *testing.T) {
			require.EqualError(t, configtest.Load(t, component.NewIDWithName(metadata.Type, name), createDefaultConfig()), want)
		})
	}
}

func TestDefaultConfigKeepsEveryStep(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, cfg.Validate())
	assert.True(t, cfg.keepsAll())
	cfg.Every = 1
	assert.True(t, cfg.keepsAll(), "every: 1 keeps every iteration")
	cfg.Every = 2
	assert.False(t, cfg.keepsAll())
}
