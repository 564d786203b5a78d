// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter/internal/metadatatest"
)

// rotatedFiles lists the rotated files next to path.
func rotatedFiles(t *testing.T, path string) []string {
	t.Helper()
	prefix, ext := splitBackupName(path)
	matches, err := filepath.Glob(prefix + "-*" + ext)
	require.NoError(t, err)
	return matches
}

func TestRotationBySizeWithTemplates(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.TracesPath = "{nemo.run.id}/traces.jsonl"
	cfg.Rotation.MaxMegabytes = 1
	cfg.FlushInterval = 0
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) }) //nolint:usetesting // t.Context() is canceled before Cleanup runs
	te := startExporters(t, cfg, metadatatest.NewSettings(tt))
	ctx := t.Context()
	sent := 0
	for i := range 12 {
		for _, run := range []string{"run-a", "run-b"} {
			td := megatronTraces(1, 250) // ~0.3 MiB
			td.ResourceSpans().At(0).Resource().Attributes().PutStr("nemo.run.id", run)
			spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
			for j := 0; j < spans.Len(); j++ {
				spans.At(j).Attributes().PutInt("batch", int64(i))
			}
			require.NoError(t, te.traces.ConsumeTraces(ctx, td))
			sent += 250
		}
	}
	te.shutdown()

	total := 0
	rotations := 0
	for _, run := range []string{"run-a", "run-b"} {
		current := filepath.Join(dir, run, "traces.jsonl")
		backups := rotatedFiles(t, current)
		assert.GreaterOrEqual(t, len(backups), 2, "each run rotates on its own")
		rotations += len(backups)
		for _, p := range append(backups, current) {
			assert.LessOrEqual(t, fileSize(t, p), int64(mib), p)
			total += countLines(t, p)
		}
	}
	assert.Equal(t, sent, total, "rotation loses and duplicates nothing")
	metadatatest.AssertEqualExporterJsonlFileRotations(t, tt,
		[]metricdata.DataPoint[int64]{{Value: int64(rotations)}}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
	metadatatest.AssertEqualExporterJsonlFileRecordsWritten(t, tt,
		[]metricdata.DataPoint[int64]{{Value: int64(sent)}}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
}

func TestRotationPrunesByCountAndAge(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Rotation = RotationConfig{MaxMegabytes: 1, MaxBackups: 2, MaxDays: 1}
	cfg.FlushInterval = 0
	current := filepath.Join(dir, "traces.jsonl")
	// A rotated file from long ago and a file that only looks like one.
	old := filepath.Join(dir, "traces-2020-01-01T00-00-00.000.jsonl")
	require.NoError(t, os.WriteFile(old, []byte("{}\n"), 0o600))
	unrelated := filepath.Join(dir, "traces-notes.jsonl")
	require.NoError(t, os.WriteFile(unrelated, []byte("keep\n"), 0o600))

	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) }) //nolint:usetesting // t.Context() is canceled before Cleanup runs
	te := startExporters(t, cfg, metadatatest.NewSettings(tt))
	for range 12 {
		require.NoError(t, te.traces.ConsumeTraces(t.Context(), megatronTraces(1, 250)))
	}
	te.shutdown()
	backups := rotatedFiles(t, current)
	assert.NotContains(t, backups, old, "older than max_days")
	assert.FileExists(t, unrelated)
	assert.Len(t, slices.DeleteFunc(backups, func(p string) bool { return p == unrelated }), 2, "max_backups")

	// Every removal of acknowledged data is said and counted.
	removed := te.logged.FilterMessageSnippet("Retention removed a rotated file").All()
	byReason := map[string]int{}
	for _, e := range removed {
		assert.Equal(t, zap.WarnLevel, e.Level)
		byReason[e.ContextMap()["by"].(string)]++
	}
	require.Equal(t, 1, byReason["rotation::max_days"], "the file from 2020")
	require.Positive(t, byReason["rotation::max_backups"])
	metadatatest.AssertEqualExporterJsonlFileFilesPruned(t, tt, []metricdata.DataPoint[int64]{
		{Attributes: attribute.NewSet(attribute.String("reason", "max_backups")), Value: int64(byReason["rotation::max_backups"])},
		{Attributes: attribute.NewSet(attribute.String("reason", "max_days")), Value: 1},
	}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
}
