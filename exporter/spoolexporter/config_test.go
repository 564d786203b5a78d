// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package spoolexporter

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/nemo-lens/otelcol-nemo/exporter/spoolexporter/internal/metadata"
)

func loadConfig(t *testing.T, name string) (*Config, error) {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	cfg := createDefaultConfig().(*Config)
	if err := sub.Unmarshal(cfg); err != nil {
		return nil, err
	}
	return cfg, confmap.Validate(cfg)
}

func TestConfig(t *testing.T) {
	cfg, err := loadConfig(t, "")
	require.NoError(t, err)
	assert.Equal(t, 8, cfg.Slots)
	assert.Equal(t, "/var/lib/otelcol-nemo/spool", cfg.Directory)
	assert.EqualValues(t, 1<<20, cfg.QueueSize)
	assert.Equal(t, 4, cfg.NumConsumers, "a default kept")
	assert.Equal(t, 8192, cfg.MaxBatchItems, "a default kept")
	assert.Zero(t, cfg.RetryConfig.MaxElapsedTime, "retries until the gateway takes it")
	assert.Equal(t, []string{"gw1:4317", "gw2:4317"}, cfg.LoadBalancing.Resolver.Static.Get().Hostnames)

	// The load balancer the slots send through has no queue nor retry of
	// its own, at either level.
	lb := cfg.balancerConfig()
	assert.False(t, lb.QueueSettings.HasValue())
	assert.False(t, lb.BackOffConfig.Enabled)
	assert.False(t, lb.Protocol.OTLP.QueueConfig.HasValue())
	assert.False(t, lb.Protocol.OTLP.RetryConfig.Enabled)
	assert.True(t, cfg.LoadBalancing.Protocol.OTLP.QueueConfig.HasValue(), "the user's config is left as it was")
}

func TestConfigMistakes(t *testing.T) {
	for name, want := range map[string]string{
		"no_directory":      "directory is required",
		"too_many_slots":    "slots: 1000 is out of range: use 1 to 256",
		"no_consumers":      "num_consumers: 0 is too small",
		"old_sending_queue": "sending_queue: the spool keeps its own queue on disk now: replace sending_queue with directory",
		"negative_drain":    "drain_timeout: -1s is negative",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadConfig(t, name)
			require.ErrorContains(t, err, want)
		})
	}
}
