// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter/internal/metadata"
	"github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter/internal/metadatatest"
)

// testConfig is the default configuration writing to dir, with the queue
// and retries off so that ConsumeX returns the outcome of the write.
func testConfig(dir string) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.Directory = dir
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	cfg.RetryConfig.Enabled = false
	return cfg
}

type testExporters struct {
	traces   exporter.Traces
	metrics  exporter.Metrics
	logs     exporter.Logs
	logged   *observer.ObservedLogs
	shutdown func()
}

// startExporters builds and starts the three signal exporters of one
// configuration from one factory, as the collector does. shutdown is
// idempotent and also runs at the end of the test.
func startExporters(t *testing.T, cfg *Config, set exporter.Settings) *testExporters {
	t.Helper()
	require.NoError(t, cfg.Validate())
	core, logged := observer.New(zap.DebugLevel)
	set.Logger = zap.New(core)
	f := NewFactory()
	ctx := t.Context()
	te := &testExporters{logged: logged}
	var err error
	te.traces, err = f.CreateTraces(ctx, set, cfg)
	require.NoError(t, err)
	te.metrics, err = f.CreateMetrics(ctx, set, cfg)
	require.NoError(t, err)
	te.logs, err = f.CreateLogs(ctx, set, cfg)
	require.NoError(t, err)
	for _, c := range []component.Component{te.traces, te.metrics, te.logs} {
		require.NoError(t, c.Start(ctx, componenttest.NewNopHost()))
	}
	var once sync.Once
	te.shutdown = func() {
		once.Do(func() {
			for _, c := range []component.Component{te.traces, te.metrics, te.logs} {
				assert.NoError(t, c.Shutdown(context.Background())) //nolint:usetesting // also runs in Cleanup, when t.Context() is already canceled
			}
		})
	}
	t.Cleanup(te.shutdown)
	return te
}

func nopSettings() exporter.Settings {
	return exportertest.NewNopSettings(metadata.Type)
}

// readRecords reads a plain, gzip or zstd JSONL file and checks that every
// line is complete, valid UTF-8 and valid JSON.
func readRecords(t *testing.T, path string) [][]byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	data := raw
	switch {
	case strings.HasSuffix(path, ".gz"):
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		require.NoError(t, err)
		data, err = io.ReadAll(zr)
		require.NoError(t, err)
	case strings.HasSuffix(path, ".zst"):
		zr, err := zstd.NewReader(bytes.NewReader(raw))
		require.NoError(t, err)
		defer zr.Close()
		data, err = io.ReadAll(zr)
		require.NoError(t, err)
	}
	if len(data) == 0 {
		return nil
	}
	lines := splitLines(t, data)
	for _, l := range lines {
		require.True(t, utf8.Valid(l) && json.Valid(l), "invalid line in %s: %q", path, l)
	}
	return lines
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	return len(readRecords(t, path))
}

func TestWritesOneFilePerSignal(t *testing.T) {
	dir := t.TempDir()
	te := startExporters(t, testConfig(dir), nopSettings())
	ctx := t.Context()
	require.NoError(t, te.traces.ConsumeTraces(ctx, megatronTraces(8, 125)))
	require.NoError(t, te.metrics.ConsumeMetrics(ctx, megatronMetrics(8, 125)))
	require.NoError(t, te.logs.ConsumeLogs(ctx, megatronLogs(8, 125)))
	te.shutdown()

	for _, name := range []string{"traces.jsonl", "metrics.jsonl", "logs.jsonl"} {
		assert.Equal(t, 1000, countLines(t, filepath.Join(dir, name)), name)
	}
	for _, l := range readRecords(t, filepath.Join(dir, "traces.jsonl")) {
		var r spanRecord
		decodeStrict(t, l, &r)
	}
	for _, l := range readRecords(t, filepath.Join(dir, "metrics.jsonl")) {
		var r metricRecord
		decodeStrict(t, l, &r)
	}
	for _, l := range readRecords(t, filepath.Join(dir, "logs.jsonl")) {
		var r logRecord
		decodeStrict(t, l, &r)
	}
}

func runTraces(resources ...map[string]any) ptrace.Traces {
	td := ptrace.NewTraces()
	for i, attrs := range resources {
		rs := td.ResourceSpans().AppendEmpty()
		if err := rs.Resource().Attributes().FromRaw(attrs); err != nil {
			panic(err)
		}
		spans := rs.ScopeSpans().AppendEmpty().Spans()
		for j := range 3 {
			s := spans.AppendEmpty()
			s.SetName(fmt.Sprintf("span-%d-%d", i, j))
		}
	}
	return td
}

func newTestTelemetry(t *testing.T) *telemetry {
	tb, err := metadata.NewTelemetryBuilder(componenttest.NewNopTelemetrySettings())
	require.NoError(t, err)
	return newTelemetry(tb)
}

func TestTelemetryCountsRecordsAndBytes(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) }) //nolint:usetesting // t.Context() is canceled before Cleanup runs
	te := startExporters(t, cfg, metadatatest.NewSettings(tt))
	require.NoError(t, te.traces.ConsumeTraces(t.Context(), megatronTraces(2, 30)))
	te.shutdown()
	metadatatest.AssertEqualExporterJsonlFileRecordsWritten(t, tt,
		[]metricdata.DataPoint[int64]{{Value: 60}}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
	metadatatest.AssertEqualExporterJsonlFileBytesWritten(t, tt,
		[]metricdata.DataPoint[int64]{{Value: fileSize(t, filepath.Join(dir, "traces.jsonl"))}},
		metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
}
