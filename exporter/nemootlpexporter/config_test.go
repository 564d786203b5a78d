// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemootlpexporter

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/nemo-lens/otelcol-nemo/exporter/nemootlpexporter/internal/metadata"
)

func loadConfig(t *testing.T, name string) (*Config, error) {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg, confmap.Validate(cfg)
}

func TestConfig(t *testing.T) {
	cfg, err := loadConfig(t, "")
	require.NoError(t, err)
	assert.Equal(t, protocolHTTPProtobuf, cfg.Protocol)
	assert.Equal(t, "https://otlp.example.com", cfg.HTTP.ClientConfig.Endpoint)
	assert.Equal(t, "https://traces.example.com/in", cfg.HTTP.TracesEndpoint, "the per-signal URLs are decoded beside confighttp's keys")
	assert.Empty(t, cfg.HTTP.MetricsEndpoint)
	assert.Equal(t, 30*time.Minute, cfg.RetryConfig.MaxElapsedTime)
	assert.Equal(t, "file_storage/queue", cfg.QueueConfig.Get().StorageID.String())
	assert.Equal(t, "nemo.run.id", cfg.DeadLetter.RunAttribute, "a default kept")

	cfg, err = loadConfig(t, "grpc")
	require.NoError(t, err)
	assert.Equal(t, protocolGRPC, cfg.Protocol, "the default protocol")
	assert.Equal(t, "backend:4317", cfg.GRPC.Endpoint)
	assert.Equal(t, configcompression.TypeGzip, cfg.GRPC.Compression, "gzip by default, as the stock exporters")
	assert.Equal(t, configcompression.TypeGzip, cfg.HTTP.ClientConfig.Compression)
}

func TestConfigMistakesNameTheKey(t *testing.T) {
	for name, want := range map[string]string{
		"bad_protocol":             `protocol: "http" is not one of grpc, http/protobuf, http/json`,
		"no_grpc_endpoint":         "grpc::endpoint is required with protocol grpc",
		"no_http_endpoint":         "http::endpoint is required with protocol http/json",
		"no_dead_letter_directory": "directory is required",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadConfig(t, name)
			require.ErrorContains(t, err, want)
		})
	}
}
