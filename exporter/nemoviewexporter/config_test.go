// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemoviewexporter

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
)

func TestConfig(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, "localhost:8890", cfg.ServerConfig.NetAddr.Endpoint)

	conf := confmap.NewFromStringMap(map[string]any{"endpoint": "127.0.0.1:9999", "max_runs": 0, "relative_threshold": 1.5, "refresh_interval": "10ms"})
	require.NoError(t, conf.Unmarshal(cfg))
	assert.Equal(t, "127.0.0.1:9999", cfg.ServerConfig.NetAddr.Endpoint)
	err := confmap.Validate(cfg)
	require.Error(t, err)
	for _, key := range []string{"max_runs: 0", "relative_threshold: 1.5", "refresh_interval: 10ms"} {
		assert.Contains(t, err.Error(), key)
	}

	saving := createDefaultConfig().(*Config)
	require.NoError(t, confmap.NewFromStringMap(map[string]any{"storage": "file_storage/queue", "save_interval": "10ms"}).Unmarshal(saving))
	assert.ErrorContains(t, confmap.Validate(saving), "save_interval: 10ms; must be at least 1s")

	off := createDefaultConfig().(*Config)
	require.NoError(t, confmap.NewFromStringMap(map[string]any{"enabled": false, "endpoint": ""}).Unmarshal(off))
	assert.NoError(t, confmap.Validate(off), "off needs no endpoint")
}
