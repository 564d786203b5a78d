// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter/internal/metadata"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)

	fullQueue := exporterhelper.NewDefaultQueueConfig()
	fullQueue.NumConsumers = 2
	fullQueue.QueueSize = 500
	fullRetry := configretry.NewDefaultBackOffConfig()
	fullRetry.MaxElapsedTime = time.Minute

	withDir := func(mutate func(*Config)) *Config {
		cfg := createDefaultConfig().(*Config)
		cfg.Directory = "./telemetry"
		if mutate != nil {
			mutate(cfg)
		}
		return cfg
	}

	tests := []struct {
		id       component.ID
		expected *Config
		errMsg   string
	}{
		{
			id:       component.NewID(metadata.Type),
			expected: withDir(nil),
		},
		{
			id: component.NewIDWithName(metadata.Type, "full"),
			expected: func() *Config {
				cfg := createDefaultConfig().(*Config)
				cfg.Directory = "/var/lib/otelcol/telemetry"
				cfg.TracesPath = "{nemo.run.id}/traces.jsonl"
				cfg.MetricsPath = "{nemo.run.id}/metrics.jsonl"
				cfg.LogsPath = "{nemo.run.id}/rank-{nv.dl.rank}.logs.jsonl"
				cfg.MissingAttributeValue = "no-run"
				cfg.MaxOpenFiles = 32
				cfg.Append = false
				cfg.FilePermissions = "0600"
				cfg.Compression = compressionGzip
				cfg.FlushInterval = 5 * time.Second
				cfg.Fsync = true
				cfg.Rotation = RotationConfig{MaxMegabytes: 256, MaxDays: 7, MaxBackups: 10, LocalTime: true}
				cfg.MaxDistinctPaths = 500
				cfg.QueueConfig = configoptional.Some(fullQueue)
				cfg.RetryConfig = fullRetry
				return cfg
			}(),
		},
		{
			// YAML reads an unquoted 0640 as the octal number it looks like.
			id:       component.NewIDWithName(metadata.Type, "unquoted_permissions"),
			expected: withDir(func(c *Config) { c.FilePermissions = "0640" }),
		},
		{id: component.NewIDWithName(metadata.Type, "no_directory"), errMsg: "directory must be set"},
		{id: component.NewIDWithName(metadata.Type, "escaping_path"), errMsg: `traces_path: must stay inside directory (no '..' element), got "../traces.jsonl"`},
		{id: component.NewIDWithName(metadata.Type, "absolute_path"), errMsg: `metrics_path: must be relative to directory, got "/tmp/metrics.jsonl"`},
		{id: component.NewIDWithName(metadata.Type, "unclosed_brace"), errMsg: `logs_path: unclosed '{' in "{nemo.run.id/logs.jsonl"`},
		{id: component.NewIDWithName(metadata.Type, "directory_path"), errMsg: `traces_path: must name a file, got "{nemo.run.id}/"`},
		{id: component.NewIDWithName(metadata.Type, "bad_fallback"), errMsg: `missing_attribute_value: must be at most 128 bytes`},
		{id: component.NewIDWithName(metadata.Type, "bad_permissions"), errMsg: `file_permissions must be an octal mode between 0001 and 0777 such as "0640", got "rw-r-----"`},
		{id: component.NewIDWithName(metadata.Type, "read_only_permissions"), errMsg: `file_permissions must let the owner read and write (0600), got "0444"`},
		{id: component.NewIDWithName(metadata.Type, "bad_compression"), errMsg: `compression must be one of none, gzip, zstd, got "lz4"`},
		{id: component.NewIDWithName(metadata.Type, "zero_open_files"), errMsg: "max_open_files must be at least 1, got 0"},
		{id: component.NewIDWithName(metadata.Type, "negative_flush"), errMsg: "flush_interval must not be negative, got -1s"},
		{id: component.NewIDWithName(metadata.Type, "negative_rotation"), errMsg: "rotation::max_megabytes must not be negative, got -1"},
		{id: component.NewIDWithName(metadata.Type, "backups_without_size"), errMsg: "rotation::max_days and rotation::max_backups need rotation::max_megabytes > 0"},
		{id: component.NewIDWithName(metadata.Type, "timeout"), errMsg: "timeout is not a jsonl_file setting: a file write cannot be interrupted once it has started; remove it"},
		{id: component.NewIDWithName(metadata.Type, "negative_paths"), errMsg: "max_distinct_paths must not be negative (0 disables the bound), got -1"},
	}

	for _, tt := range tests {
		t.Run(tt.id.String(), func(t *testing.T) {
			cfg := createDefaultConfig()
			sub, err := cm.Sub(tt.id.String())
			require.NoError(t, err)
			err = sub.Unmarshal(cfg)
			if err == nil {
				err = confmap.Validate(cfg)
			}
			if tt.errMsg != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.errMsg)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.expected, cfg)
		})
	}
}

func TestDefaultConfig(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	assert.Equal(t, "traces.jsonl", cfg.TracesPath)
	assert.Equal(t, "metrics.jsonl", cfg.MetricsPath)
	assert.Equal(t, "logs.jsonl", cfg.LogsPath)
	assert.True(t, cfg.Append)
	assert.Equal(t, "0640", cfg.FilePermissions)
	assert.Equal(t, time.Second, cfg.FlushInterval)
	assert.Equal(t, 100, cfg.MaxOpenFiles)
	assert.Equal(t, 9000, cfg.MaxDistinctPaths)
	assert.True(t, cfg.QueueConfig.HasValue())
	assert.True(t, cfg.RetryConfig.Enabled)
	// The default configuration only lacks the directory.
	require.EqualError(t, confmap.Validate(cfg), "directory must be set")
}

func TestDirPermissions(t *testing.T) {
	assert.Equal(t, "-rwxr-x---", dirPermissions(0o640).String())
	assert.Equal(t, "-rwx------", dirPermissions(0o600).String())
	assert.Equal(t, "-rwxr-xr-x", dirPermissions(0o644).String())
}
