// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter/internal/metadata"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/configtest"
)

func TestLoadConfig(t *testing.T) {
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
		wantErr  error
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
		{id: component.NewIDWithName(metadata.Type, "no_directory"), wantErr: errNoDirectory},
		{id: component.NewIDWithName(metadata.Type, "escaping_path"), wantErr: errEscapingPath},
		{id: component.NewIDWithName(metadata.Type, "absolute_path"), wantErr: errAbsolutePath},
		{id: component.NewIDWithName(metadata.Type, "unclosed_brace"), wantErr: errUnclosedBrace},
		{id: component.NewIDWithName(metadata.Type, "directory_path"), wantErr: errNotAFile},
		{id: component.NewIDWithName(metadata.Type, "bad_fallback"), wantErr: errPathValue},
		{id: component.NewIDWithName(metadata.Type, "bad_permissions"), wantErr: errFilePermissions},
		{id: component.NewIDWithName(metadata.Type, "read_only_permissions"), wantErr: errOwnerReadWrite},
		{id: component.NewIDWithName(metadata.Type, "bad_compression"), wantErr: errCompression},
		{id: component.NewIDWithName(metadata.Type, "zero_open_files"), wantErr: errMaxOpenFiles},
		{id: component.NewIDWithName(metadata.Type, "negative_flush"), wantErr: errFlushInterval},
		{id: component.NewIDWithName(metadata.Type, "negative_rotation"), wantErr: errNegativeRotation},
		{id: component.NewIDWithName(metadata.Type, "backups_without_size"), wantErr: errRotationWithoutSize},
		{id: component.NewIDWithName(metadata.Type, "timeout"), wantErr: errTimeoutKey},
		{id: component.NewIDWithName(metadata.Type, "negative_paths"), wantErr: errMaxDistinctPaths},
	}

	for _, tt := range tests {
		t.Run(tt.id.String(), func(t *testing.T) {
			cfg := createDefaultConfig()
			err := configtest.Load(t, tt.id, cfg)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
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
	require.ErrorIs(t, confmap.Validate(cfg), errNoDirectory)
	require.EqualError(t, confmap.Validate(cfg), "directory must be set", "the only error")
}

// The messages whose text is the point: a path template's names its key and
// what it got, timeout's says what bounds a write instead.
func TestErrorMessagesNameTheKeyAndTheFix(t *testing.T) {
	for name, want := range map[string]string{
		"escaping_path": `traces_path: must stay inside directory (no '..' element), got "../traces.jsonl"`,
		"timeout": "timeout is not a jsonl_file setting: a file write cannot be interrupted once it has started; " +
			"remove it (sending_queue::block_on_overflow and the senders' own timeouts bound how long a request waits)",
	} {
		t.Run(name, func(t *testing.T) {
			err := configtest.Load(t, component.NewIDWithName(metadata.Type, name), createDefaultConfig())
			// Contains: confmap puts the path of the key being decoded in front.
			require.ErrorContains(t, err, want)
		})
	}
}

func TestDirPermissions(t *testing.T) {
	assert.Equal(t, "-rwxr-x---", dirPermissions(0o640).String())
	assert.Equal(t, "-rwx------", dirPermissions(0o600).String())
	assert.Equal(t, "-rwxr-xr-x", dirPermissions(0o644).String())
}
