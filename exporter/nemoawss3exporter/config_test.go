// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemoawss3exporter

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/nemo-lens/otelcol-nemo/exporter/nemoawss3exporter/internal/metadata"
)

func loadConfig(t *testing.T, name string) (*Config, error) {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	c := NewFactory().CreateDefaultConfig().(*Config)
	if err := sub.Unmarshal(c); err != nil {
		return nil, err
	}
	return c, confmap.Validate(c)
}

// The awss3 keys and dead_letter decode side by side: neither swallows the
// other's keys.
func TestTheStockKeysAndDeadLetterDecode(t *testing.T) {
	c, err := loadConfig(t, "")
	require.NoError(t, err)
	assert.Equal(t, "eu-west-1", c.stock.S3Uploader.Region)
	assert.Equal(t, "training-telemetry", c.stock.S3Uploader.S3Bucket)
	assert.Equal(t, "http://127.0.0.1:7070", c.stock.S3Uploader.Endpoint)
	assert.True(t, c.stock.S3Uploader.S3ForcePathStyle)
	assert.Equal(t, "nemo.run.id", c.stock.ResourceAttrsToS3.S3Prefix)
	assert.Equal(t, 60*time.Second, c.stock.TimeoutSettings.Timeout)
	assert.Equal(t, 30*time.Minute, c.stock.BackOffConfig.MaxElapsedTime)
	require.True(t, c.stock.QueueSettings.HasValue())
	assert.Equal(t, int64(100000), c.stock.QueueSettings.Get().QueueSize)
	assert.Equal(t, "/var/lib/nemo/telemetry", c.DeadLetter.Directory)
	assert.Equal(t, "nemo.run.id", c.DeadLetter.RunAttribute)
}

func TestConfigMistakesNameTheKey(t *testing.T) {
	_, err := loadConfig(t, "no_dead_letter")
	require.EqualError(t, err, "dead_letter: directory is required: what the destination does not take is written there, next to the runs' files (the presets use NEMO_TELEMETRY_DIR)")
	_, err = loadConfig(t, "bad_storage_class")
	require.EqualError(t, err, "invalid StorageClass", "the stock exporter's check, once")
	_, err = loadConfig(t, "misspelled")
	require.ErrorContains(t, err, "has invalid keys: s3uploadr")
}
