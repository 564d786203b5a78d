// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"

	"github.com/nemo-lens/otelcol-nemo/internal/steps"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/configtest"
	"github.com/nemo-lens/otelcol-nemo/processor/nemostepsprocessor/internal/metadata"
)

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		name    string
		want    *Config
		wantErr []error
		// wantText is the message of an error with no kind to match.
		wantText string
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
			Waits:  steps.Waits{DecisionWait: 10 * time.Second},
			Stalls: configoptional.Some(StallsConfig{MinStall: time.Minute, StallFactor: 10, JobSpanNames: []string{"megatron.pretrain", "megatron.train", "workload"}}),
			Goodput: configoptional.Some(GoodputConfig{
				Interval:                5 * time.Minute,
				CheckpointLoadSpanNames: []string{"megatron.checkpoint.load*", "megatron.load_checkpoint"},
				CheckpointSaveSpanNames: []string{"megatron.checkpoint.save*", "megatron.checkpoint.exposed_save*", "megatron.save_checkpoint"},
				EvaluationSpanNames:     []string{"megatron.evaluate*", "megatron.eval.*"},
				JobSpanNames:            []string{"megatron.pretrain", "megatron.train", "workload"},
			}),
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
			Waits:  steps.Waits{DecisionWait: 30 * time.Second, SpanWait: 20 * time.Second},
			Stalls: configoptional.Some(StallsConfig{MinStall: 2 * time.Minute, StallFactor: 5, JobSpanNames: []string{"nemo_rl.run"}}),
			Goodput: configoptional.Some(GoodputConfig{
				Interval:                time.Minute,
				CheckpointLoadSpanNames: []string{"nemo_rl.load"},
				CheckpointSaveSpanNames: []string{"nemo_rl.save*"},
				EvaluationSpanNames:     []string{"nemo_rl.validate"},
				JobSpanNames:            []string{"nemo_rl.run"},
			}),
			Interval:         15 * time.Second,
			MaxOpenRankSteps: 200_000,
			Keys: steps.Keys{
				RankKeys:      []string{"my.rank"},
				WorldSizeKeys: []string{},
				LocalRankKeys: []string{"my.local_rank"},
				GroupKeys:     []string{"slurm.job.id"},
			},
		}},
		{name: "bad_threshold", wantErr: []error{steps.ErrScoreRange}},
		{name: "bad_individual_threshold", wantErr: []error{steps.ErrScoreRange}},
		{name: "bad_wait_pattern", wantErr: []error{steps.ErrStarNotAtEnd}},
		{name: "match_everything", wantErr: []error{steps.ErrMatchesEverySpan}},
		{name: "empty_step_names", wantErr: []error{steps.ErrNoStepSpanNames}},
		{name: "empty_step_name", wantErr: []error{steps.ErrEmptyKey}},
		{name: "negative_interval", wantErr: []error{errInterval}},
		{name: "negative_decision_wait", wantErr: []error{steps.ErrDecisionWait}},
		{name: "zero_decision_wait", wantErr: []error{steps.ErrDecisionWait}},
		{name: "negative_span_wait", wantErr: []error{steps.ErrNegativeSpanWait}},
		{name: "no_rank_keys", wantErr: []error{steps.ErrNoKeys}},
		{name: "bad_limits", wantErr: []error{steps.ErrHistory, errMaxOpenRankSteps}},
		{name: "empty_iteration_attribute", wantErr: []error{steps.ErrNoIterationAttribute}},
		{name: "bad_stall", wantErr: []error{errMinStall, errStallFactor}},
		{name: "bad_goodput", wantErr: []error{errGoodputInterval, steps.ErrStarNotAtEnd, steps.ErrEmptyKey}},
		{name: "goodput_off", want: func() *Config {
			cfg := createDefaultConfig().(*Config)
			cfg.Goodput = configoptional.None[GoodputConfig]()
			return cfg
		}()},
		{name: "stalls_off", want: func() *Config {
			cfg := createDefaultConfig().(*Config)
			cfg.Stalls = configoptional.None[StallsConfig]()
			return cfg
		}()},
		// A decoding error of the collector's, named by the key.
		{name: "stalls_enabled_not_bool", wantText: "unexpected type string for 'enabled': got 'off' value expected 'true' or 'false'"},
		// The stall keys belong in the stalls block: elsewhere the collector
		// refuses them by name.
		{name: "stall_keys_outside_stalls", wantText: "has invalid keys: job_span_names, min_stall, stall_factor"},
	}
	for _, tt := range tests {
		id := component.NewIDWithName(metadata.Type, tt.name)
		t.Run(id.String(), func(t *testing.T) {
			cfg := createDefaultConfig()
			err := configtest.Load(t, id, cfg)
			if tt.wantText != "" {
				require.ErrorContains(t, err, tt.wantText)
				return
			}
			if tt.wantErr != nil {
				for _, want := range tt.wantErr {
					require.ErrorIs(t, err, want)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg)
		})
	}
}

// The stall checks say what to write.
func TestErrorMessagesNameTheKeyAndTheFix(t *testing.T) {
	for name, want := range map[string]string{
		"bad_stall": "stalls: min_stall must be positive (the shortest silence that counts as a stall, e.g. 60s), got 0s\n" +
			"stall_factor must be 0 or more (a stall is longer than stall_factor x the median step), got -1",
	} {
		t.Run(name, func(t *testing.T) {
			require.EqualError(t, configtest.Load(t, component.NewIDWithName(metadata.Type, name), createDefaultConfig()), want)
		})
	}
}

func TestDefaultConfigIsValid(t *testing.T) {
	require.NoError(t, createDefaultConfig().(*Config).Validate())
}
