// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepsamplingprocessor

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor/internal/metadata"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)

	withDefaults := func(edit func(*Config)) *Config {
		cfg := createDefaultConfig().(*Config)
		edit(cfg)
		return cfg
	}
	tests := []struct {
		name    string
		want    *Config
		wantErr string
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
		{name: "sample_rate_too_high", wantErr: "sample_rate must be a fraction in [0,1] (0.01 keeps 1% of steps, 1 keeps every step), got 1.5"},
		{name: "sample_rate_negative", wantErr: "sample_rate must be a fraction in [0,1] (0.01 keeps 1% of steps, 1 keeps every step), got -0.1"},
		{name: "every_negative", wantErr: "every must be 0 (unused) or a positive number of iterations (10 keeps 0, 10, 20, ...), got -10"},
		{name: "both", wantErr: "sample_rate (0.1) and every (10) are alternatives: set one of them and leave the other at its default (sample_rate: 1, every: 0)"},
		{name: "no_step_span_names", wantErr: "step_span_names must list at least one span name, e.g. [megatron.train_step, megatron.train.iteration]"},
		{name: "empty_step_span_name", wantErr: "step_span_names[1] must not be empty; remove the entry"},
		{name: "no_rank_keys", wantErr: "rank_keys must list at least one attribute key, e.g. [nv.dl.rank, dl.rank]"},
		{name: "empty_run_id_key", wantErr: "run_id_key must name the resource attribute holding the run id, e.g. nemo.run.id"},
		{name: "empty_iteration_attribute", wantErr: "iteration_attribute must not be empty; the default is megatron.iteration"},
		{name: "old_decision_wait", wantErr: "decision_wait (here: how long a span waits for its step span) was renamed span_wait; decision_wait now only means how long a step stays open: set span_wait: 30s"},
		{name: "bad_span_wait", wantErr: "span_wait must be positive (the longest a span waits for its step span), e.g. 10s, got 0s"},
		{name: "bad_max_buffered_spans", wantErr: "max_buffered_spans must be at least 1, got 0"},
	}
	for _, tt := range tests {
		id := component.NewIDWithName(metadata.Type, tt.name)
		t.Run(id.String(), func(t *testing.T) {
			sub, err := cm.Sub(id.String())
			require.NoError(t, err)
			cfg := createDefaultConfig()
			require.NoError(t, sub.Unmarshal(cfg))
			err = confmap.Validate(cfg)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg)
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
