// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemorunprocessor

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/nemo-lens/otelcol-nemo/processor/nemorunprocessor/internal/metadata"
)

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		id      component.ID
		want    func() *Config
		wantErr string
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
		{id: component.NewIDWithName(metadata.Type, "bad_window"), wantErr: "single_node_window must be positive when reconcile_single_node is true, got 0s"},
		{id: component.NewIDWithName(metadata.Type, "short_idle"), wantErr: "single_node_idle_timeout must be longer than single_node_window (10m0s), got 5m0s"},
		{id: component.NewIDWithName(metadata.Type, "empty_set"), wantErr: "job_keys[1] must list at least one attribute key"},
		{id: component.NewIDWithName(metadata.Type, "empty_key"), wantErr: "job_keys[0][1] must not be empty"},
		{id: component.NewIDWithName(metadata.Type, "written_key"), wantErr: `job_keys[0][0] must not be "nemo.run.id", an attribute this processor writes`},
		{id: component.NewIDWithName(metadata.Type, "duplicate_key"), wantErr: `job_keys[0] lists "k8s.job.name" twice`},
		{id: component.NewIDWithName(metadata.Type, "too_many_keys"), wantErr: "job_keys[0] lists 9 keys, at most 8 are allowed"},
		{id: component.NewIDWithName(metadata.Type, "bad_pattern"), wantErr: "per_process_id_pattern is not a valid regular expression"},
		{id: component.NewIDWithName(metadata.Type, "bad_env"), wantErr: `env_run_ids[1] must be one line, got "42\n43"`},
		{id: component.NewIDWithName(metadata.Type, "no_settle"), wantErr: "single_node_settle must be positive when reconcile_single_node is true, got 0s"},
		{id: component.NewIDWithName(metadata.Type, "hold_not_above_settle"), wantErr: "single_node_hold must be longer than single_node_settle (3s), got 3s"},
		{id: component.NewIDWithName(metadata.Type, "long_hold"), wantErr: "single_node_hold must be below 10s, the OpenTelemetry SDKs' default export timeout (a sender held longer gives up and retries), got 12s"},
		{id: component.NewIDWithName(metadata.Type, "window_not_above_hold"), wantErr: "single_node_window must be longer than single_node_hold (5s), got 5s"},
		{id: component.NewIDWithName(metadata.Type, "blank_run_id"), wantErr: `run_id must not be blank or have surrounding spaces, got "  "`},
		{id: component.NewIDWithName(metadata.Type, "override_without_id"), wantErr: "override is true but the collector has no run id of its own: run_id and every env_run_ids value are empty"},
		{id: component.NewIDWithName(metadata.Type, "bad_wandb"), wantErr: `wandb_entity must be a bare W&B name without '/' or ':', got "nvidia/research"`},
	}

	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	for _, tt := range tests {
		t.Run(tt.id.String(), func(t *testing.T) {
			cfg := NewFactory().CreateDefaultConfig()
			sub, err := cm.Sub(tt.id.String())
			require.NoError(t, err)
			require.NoError(t, sub.Unmarshal(cfg))

			err = confmap.Validate(cfg)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want(), cfg)
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
