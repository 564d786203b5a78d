// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemorunprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/configtest"
	"github.com/nemo-lens/otelcol-nemo/processor/nemorunprocessor/internal/metadata"
)

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		id      component.ID
		want    func() *Config
		wantErr error
	}{
		{id: component.NewID(metadata.Type), want: func() *Config { return createDefaultConfig().(*Config) }},
		{
			id: component.NewIDWithName(metadata.Type, "full"),
			want: func() *Config {
				c := createDefaultConfig().(*Config)
				c.JobKeys = [][]string{{"slurm.cluster.name", "slurm.job.id"}, {"k8s.namespace.name", "k8s.job.name"}}
				c.EnvRunIDs = []string{"exp-1", "", "4242"}
				c.RunID = "llama3-70b-pretrain"
				c.WandbEntity = "nvidia-research"
				c.WandbProject = "llama3"
				c.CanonicalRanks = true
				return c
			},
		},
		{
			id: component.NewIDWithName(metadata.Type, "sidecar"),
			want: func() *Config {
				c := createDefaultConfig().(*Config)
				c.Override = true
				c.EnvRunIDs = []string{"", "4242"}
				c.JobKeys = [][]string{}
				return c
			},
		},
		{
			id: component.NewIDWithName(metadata.Type, "trust_senders"),
			want: func() *Config {
				c := createDefaultConfig().(*Config)
				c.PerProcessIDPattern = ""
				return c
			},
		},
		{
			id: component.NewIDWithName(metadata.Type, "launch_sidecar"),
			want: func() *Config {
				c := createDefaultConfig().(*Config)
				c.Override = true
				c.EnvRunIDs = []string{"launch-7"}
				return c
			},
		},
		{
			id: component.NewIDWithName(metadata.Type, "k8s_reruns"),
			want: func() *Config {
				c := createDefaultConfig().(*Config)
				c.JobKeys = [][]string{{"k8s.namespace.name", "k8s.job.name", "k8s.job.uid"}}
				return c
			},
		},
		{
			id: component.NewIDWithName(metadata.Type, "single_node"),
			want: func() *Config {
				c := createDefaultConfig().(*Config)
				c.SingleNodeWindow = 2 * time.Minute
				c.SingleNodeSettle = 2 * time.Second
				c.SingleNodeHold = 8 * time.Second
				c.SingleNodeIdleTimeout = 72 * time.Hour
				return c
			},
		},
		{
			id: component.NewIDWithName(metadata.Type, "single_node_off"),
			want: func() *Config {
				c := createDefaultConfig().(*Config)
				c.ReconcileSingleNode = false
				c.SingleNodeWindow = 0
				return c
			},
		},
		{id: component.NewIDWithName(metadata.Type, "bad_window"), wantErr: errSingleNodeWindow},
		{id: component.NewIDWithName(metadata.Type, "short_idle"), wantErr: errIdleNotAboveWindow},
		{id: component.NewIDWithName(metadata.Type, "empty_set"), wantErr: errEmptyJobKeySet},
		{id: component.NewIDWithName(metadata.Type, "empty_key"), wantErr: errEmptyJobKey},
		{id: component.NewIDWithName(metadata.Type, "written_key"), wantErr: errWrittenJobKey},
		{id: component.NewIDWithName(metadata.Type, "duplicate_key"), wantErr: errDuplicateJobKey},
		{id: component.NewIDWithName(metadata.Type, "too_many_keys"), wantErr: errTooManyJobKeys},
		{id: component.NewIDWithName(metadata.Type, "bad_pattern"), wantErr: errPerProcessIDPattern},
		{id: component.NewIDWithName(metadata.Type, "bad_env"), wantErr: errMultiLineRunID},
		{id: component.NewIDWithName(metadata.Type, "no_settle"), wantErr: errSingleNodeSettle},
		{id: component.NewIDWithName(metadata.Type, "hold_not_above_settle"), wantErr: errHoldNotAboveSettle},
		{id: component.NewIDWithName(metadata.Type, "long_hold"), wantErr: errLongHold},
		{id: component.NewIDWithName(metadata.Type, "window_not_above_hold"), wantErr: errWindowNotAboveHold},
		{id: component.NewIDWithName(metadata.Type, "blank_run_id"), wantErr: errBlankRunID},
		{id: component.NewIDWithName(metadata.Type, "override_without_id"), wantErr: errOverrideWithoutRunID},
		{id: component.NewIDWithName(metadata.Type, "bad_wandb"), wantErr: errWandbName},
	}

	for _, tt := range tests {
		t.Run(tt.id.String(), func(t *testing.T) {
			cfg := NewFactory().CreateDefaultConfig()
			err := configtest.Load(t, tt.id, cfg)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want(), cfg)
		})
	}
}

// The messages whose text is the point: the index of the job_keys entry and
// the key at fault, and the variables that give the collector a run id.
func TestErrorMessagesNameTheKeyAndTheFix(t *testing.T) {
	for name, want := range map[string]string{
		"written_key": `job_keys[0][0] must not be an attribute this processor writes, got "nemo.run.id"`,
		"override_without_id": "override is true but the collector has no run id of its own: run_id and every env_run_ids value are empty " +
			"(with the presets, set NEMO_LENS_RUN_ID or NEMO_RUN_ID in the collector's environment)",
	} {
		t.Run(name, func(t *testing.T) {
			require.EqualError(t, configtest.Load(t, component.NewIDWithName(metadata.Type, name), createDefaultConfig()), want)
		})
	}
}

func TestDefaultConfigIsValid(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, cfg.Validate())
	assert.Equal(t, [][]string{{"slurm.job.id"}, {"nv.dl.job.uuid"}, {"k8s.namespace.name", "k8s.job.name"}}, cfg.JobKeys)
	assert.Empty(t, cfg.EnvRunIDs, "the processor never reads its environment: configs pass ${env:...} values")
	assert.Empty(t, cfg.WandbEntity)
	assert.Empty(t, cfg.WandbProject)
	assert.Equal(t, `^[0-9a-f]{12}$`, cfg.PerProcessIDPattern)
	assert.False(t, cfg.Override)
	assert.False(t, cfg.CanonicalRanks)
	assert.True(t, cfg.ReconcileSingleNode)
	assert.Equal(t, 60*time.Second, cfg.SingleNodeWindow)
	assert.Equal(t, time.Second, cfg.SingleNodeSettle)
	assert.Equal(t, 5*time.Second, cfg.SingleNodeHold)
	assert.Equal(t, 7*24*time.Hour, cfg.SingleNodeIdleTimeout)
}
