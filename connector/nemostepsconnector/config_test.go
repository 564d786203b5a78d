// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsconnector

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector/internal/metadata"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)

	tests := []struct {
		name    string
		want    *Config
		wantErr string
	}{
		{name: "", want: &Config{
			Settings: steps.Settings{
				Spans: steps.Spans{
					StepSpanNames:      []string{"megatron.train_step", "megatron.train.iteration"},
					IterationAttribute: "megatron.iteration",
				},
				Scoring: steps.Scoring{
					WaitSpans:           []string{"megatron.grad_sync.*", "megatron.p2p.recv_*", "megatron.pp.recv_*"},
					RelativeThreshold:   0.7,
					IndividualThreshold: 0.7,
					History:             20,
				},
			},
			Waits:            steps.Waits{DecisionWait: 10 * time.Second},
			Stalls:           configoptional.Some(StallsConfig{MinStall: time.Minute, StallFactor: 10, JobSpanNames: []string{"megatron.pretrain", "megatron.train", "workload"}}),
			MaxOpenRankSteps: 1_000_000,
			Keys: steps.Keys{
				RankKeys:      []string{"nv.dl.rank", "dl.rank"},
				WorldSizeKeys: []string{"nv.dl.world_size", "dl.world_size"},
				LocalRankKeys: []string{"nv.dl.local_rank", "dl.local_rank"},
				GroupKeys:     []string{"nemo.run.id", "rl.worker_group"},
			},
		}},
		{name: "full", want: &Config{
			Settings: steps.Settings{
				Spans: steps.Spans{
					StepSpanNames:      []string{"nemo_rl.train_step"},
					IterationAttribute: "nemo_rl.step",
				},
				Scoring: steps.Scoring{
					WaitSpans:           []string{"nemo_rl.wait_for_peers", "torch.distributed.*"},
					RelativeThreshold:   0.6,
					IndividualThreshold: 0,
					History:             50,
				},
			},
			Waits:            steps.Waits{DecisionWait: 30 * time.Second, SpanWait: 20 * time.Second},
			Stalls:           configoptional.Some(StallsConfig{MinStall: 2 * time.Minute, StallFactor: 5, JobSpanNames: []string{"nemo_rl.run"}}),
			Interval:         15 * time.Second,
			MaxOpenRankSteps: 200_000,
			Keys: steps.Keys{
				RankKeys:      []string{"my.rank"},
				WorldSizeKeys: []string{},
				LocalRankKeys: []string{"my.local_rank"},
				GroupKeys:     []string{"slurm.job.id"},
			},
		}},
		{name: "bad_threshold", wantErr: "relative_threshold must be a score in [0,1] (the fastest time over this rank's; 0 switches it off), got 1.5"},
		{name: "bad_individual_threshold", wantErr: "individual_threshold must be a score in [0,1] (the fastest time over this rank's; 0 switches it off), got -0.1"},
		{name: "bad_wait_pattern", wantErr: `wait_spans: entry 0 ("megatron.*.recv"): "*" is only allowed at the end, as in "megatron.grad_sync.*"`},
		{name: "match_everything", wantErr: `wait_spans: entry 0 ("*") would match every span`},
		{name: "empty_step_names", wantErr: "step_span_names must list at least one span name, e.g. [megatron.train_step, megatron.train.iteration]"},
		{name: "empty_step_name", wantErr: "step_span_names[1] must not be empty"},
		{name: "negative_interval", wantErr: "interval must be 0 (one point per rank per step) or positive (aggregate per rank over that long), got -1s"},
		{name: "negative_decision_wait", wantErr: "decision_wait must be positive (a step is decided at the latest this long after its first step span), got -5s"},
		{name: "zero_decision_wait", wantErr: "decision_wait must be positive"},
		{name: "negative_span_wait", wantErr: "span_wait must be positive, or 0 to wait as long as decision_wait, got -1s"},
		{name: "no_rank_keys", wantErr: "rank_keys must list at least one attribute key, e.g. [nv.dl.rank, dl.rank]"},
		{name: "bad_limits", wantErr: "history must be at least 1 step, got 0\nmax_open_rank_steps must be at least 1, got 0"},
		{name: "empty_iteration_attribute", wantErr: "iteration_attribute must not be empty; the default is megatron.iteration"},
		{name: "bad_stall", wantErr: "min_stall must be positive (the shortest silence that counts as a stall, e.g. 60s), got 0s\nstall_factor must be 0 or more (a stall is longer than stall_factor x the median step), got -1"},
		{name: "stalls_off", want: func() *Config {
			cfg := createDefaultConfig().(*Config)
			cfg.Stalls = configoptional.None[StallsConfig]()
			return cfg
		}()},
		{name: "stalls_enabled_not_bool", wantErr: "unexpected type string for 'enabled': got 'off' value expected 'true' or 'false'"},
		{name: "moved_stall_keys", wantErr: "min_stall moved into the stalls block: write stalls: {min_stall: 30s} (stalls: {enabled: false} turns stall detection off)\n" +
			"stall_factor moved into the stalls block: write stalls: {stall_factor: 4} (stalls: {enabled: false} turns stall detection off)\n" +
			"job_span_names moved into the stalls block: write stalls: {job_span_names: [nemo_rl.run]} (stalls: {enabled: false} turns stall detection off)"},
	}
	for _, tt := range tests {
		id := component.NewIDWithName(metadata.Type, tt.name)
		t.Run(id.String(), func(t *testing.T) {
			cfg := createDefaultConfig()
			sub, err := cm.Sub(id.String())
			require.NoError(t, err)
			err = sub.Unmarshal(cfg)
			if err == nil {
				err = confmap.Validate(cfg)
			}
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

func TestDefaultConfigIsValid(t *testing.T) {
	require.NoError(t, createDefaultConfig().(*Config).Validate())
}
