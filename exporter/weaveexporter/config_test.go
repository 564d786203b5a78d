// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package weaveexporter

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/nemo-lens/otelcol-nemo/exporter/weaveexporter/internal/metadata"
)

func loadConfig(t *testing.T, name string) (*Config, error) {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	if err := sub.Unmarshal(cfg); err != nil {
		return nil, err
	}
	return cfg, confmap.Validate(cfg)
}

func TestLoadValidConfig(t *testing.T) {
	t.Run("minimal", func(t *testing.T) {
		cfg, err := loadConfig(t, "")
		require.NoError(t, err)
		want := createDefaultConfig().(*Config)
		want.APIKey = "test-key"
		want.DeadLetter.Directory = "./telemetry"
		assert.Equal(t, want, cfg)
		u, err := cfg.tracesURL()
		require.NoError(t, err)
		assert.Equal(t, "https://trace.wandb.ai/otel/v1/traces", u)
		assert.Equal(t, configcompression.TypeGzip, cfg.ClientConfig.Compression)
		assert.Equal(t, AuthModeHeader, cfg.AuthMode)
		assert.Equal(t, 4<<20, cfg.MaxRequestBytes)
		assert.Empty(t, cfg.RunIDAttribute, "run linking is off by default")
	})

	t.Run("full", func(t *testing.T) {
		cfg, err := loadConfig(t, "full")
		require.NoError(t, err)
		assert.Equal(t, configopaque.String("test-key"), cfg.APIKey)
		assert.Equal(t, AuthModeBasic, cfg.AuthMode)
		assert.Equal(t, "acme", cfg.Entity)
		assert.Equal(t, "llm-pretrain", cfg.Project)
		assert.Equal(t, "nemo.run.id", cfg.RunIDAttribute)
		assert.Equal(t, 2<<20, cfg.MaxRequestBytes)
		assert.Equal(t, 10*time.Second, cfg.ClientConfig.Timeout)
		assert.Equal(t, configcompression.TypeDeflate, cfg.ClientConfig.Compression)
		team, ok := cfg.ClientConfig.Headers.Get("x-team")
		assert.True(t, ok)
		assert.Equal(t, configopaque.String("research"), team)
		require.True(t, cfg.QueueConfig.HasValue())
		assert.Equal(t, 4, cfg.QueueConfig.Get().NumConsumers)
		assert.Equal(t, int64(500), cfg.QueueConfig.Get().QueueSize)
		assert.Equal(t, 10*time.Minute, cfg.RetryConfig.MaxElapsedTime)
	})

	for name, want := range map[string]string{
		"dedicated":                 "https://acme.wandb.io/traces/otel/v1/traces",
		"dedicated_url_in_endpoint": "https://acme.wandb.io/traces/otel/v1/traces",
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := loadConfig(t, name)
			require.NoError(t, err)
			u, err := cfg.tracesURL()
			require.NoError(t, err)
			assert.Equal(t, want, u)
		})
	}
}

func TestLoadInvalidConfig(t *testing.T) {
	tests := map[string]error{
		"missing_api_key":                 errNoAPIKey,
		"api_key_with_newline":            errAPIKeySpaces,
		"double_v1_traces":                errDoubleTracesSuffix,
		"base_url":                        errNoTracesSuffix,
		"dedicated_without_traces_prefix": errNoTracesPrefix,
		"not_http":                        errEndpointScheme,
		"credentials_in_endpoint":         errEndpointCredentials,
		"dedicated_without_host":          errNoHost,
		"dedicated_with_endpoint":         errEndpointWithDedicated,
		"host_with_scheme":                errBadHost,
		"host_without_dedicated":          errHostWithoutDedicated,
		"bad_deployment":                  errDeployment,
		"bad_auth_mode":                   errAuthMode,
		"entity_with_slash":               errSlashInName,
		"small_max_request_bytes":         errMaxRequestBytes,
		"zstd":                            errCompression,
	}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := loadConfig(t, name)
			require.ErrorIs(t, err, want)
			assert.NotContains(t, err.Error(), "test-key", "errors never show the API key")
			assert.NotContains(t, err.Error(), "hunter2")
		})
	}
}

func TestDeadLetterDirectoryIsRequired(t *testing.T) {
	_, err := loadConfig(t, "missing_dead_letter_directory")
	require.EqualError(t, err, "dead_letter: directory is required: what the destination does not take is written there, next to the runs' files (the presets use NEMO_TELEMETRY_DIR)")
}

// The endpoint's messages, whose text is the fix: the URL to use instead.
func TestEndpointMessagesShowTheFix(t *testing.T) {
	for name, want := range map[string]string{
		"double_v1_traces": `endpoint "https://trace.wandb.ai/otel/v1/traces/v1/traces" ends in /v1/traces/v1/traces: the weave exporter sends to endpoint as given ` +
			"(otlp_http's endpoint is a base that gets /v1/traces appended, this one is not); remove the repeated /v1/traces, e.g. https://trace.wandb.ai/otel/v1/traces",
		"base_url": `endpoint "https://trace.wandb.ai/otel" does not end in /v1/traces: the weave exporter sends to endpoint as given, so it must be the full traces URL, ` +
			"e.g. https://trace.wandb.ai/otel/v1/traces, or use deployment: dedicated with host for https://<host>/traces/otel/v1/traces",
		"dedicated_without_traces_prefix": `endpoint "https://acme.wandb.io/otel/v1/traces" lacks the /traces prefix that dedicated and self-managed W&B deployments need: ` +
			"use https://acme.wandb.io/traces/otel/v1/traces, or deployment: dedicated with host: acme.wandb.io",
		"dedicated_with_endpoint": "endpoint cannot be combined with deployment: dedicated, which sends to https://acme.wandb.io/traces/otel/v1/traces; " +
			"remove endpoint, or remove deployment and host",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadConfig(t, name)
			require.EqualError(t, err, want)
		})
	}
}

func TestValidateProgrammaticConfig(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.APIKey = "k"
	cfg.AuthMode = ""
	cfg.Project = " llm"
	cfg.RunIDAttribute = "nemo.run.id "
	err := cfg.Validate()
	require.ErrorIs(t, err, errAuthMode)
	require.ErrorIs(t, err, errSurroundingSpaces)
	// One kind, two keys: the messages tell them apart.
	require.EqualError(t, err, `auth_mode must be header or basic, got ""`+"\n"+
		`project must not start or end with spaces, got " llm"`+"\n"+
		`run_id_attribute must not start or end with spaces, got "nemo.run.id "`)

	cfg = createDefaultConfig().(*Config)
	cfg.APIKey = "k"
	cfg.ClientConfig.Endpoint = ""
	require.ErrorIs(t, cfg.Validate(), errNoEndpoint)
}
