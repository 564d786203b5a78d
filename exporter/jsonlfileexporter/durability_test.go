// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter/internal/metadatatest"
)

// durableConfig is the presets' durable setting: fsync, no buffering, and a
// sending queue that waits for the write and merges concurrent requests into
// one batch (one write and one fsync per file: a group commit). The batch is
// flushed when it holds minItems items or after flushTimeout.
func durableConfig(dir string, minItems int64, flushTimeout time.Duration) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.Directory = dir
	cfg.FlushInterval = 0
	cfg.Fsync = true
	cfg.RetryConfig.Enabled = false
	q := exporterhelper.NewDefaultQueueConfig()
	q.WaitForResult = true
	q.BlockOnOverflow = true
	q.NumConsumers = 1
	q.Batch = configoptional.Some(exporterhelper.BatchConfig{
		FlushTimeout: flushTimeout,
		Sizer:        exporterhelper.RequestSizerTypeItems,
		MinSize:      minItems,
	})
	cfg.QueueConfig = configoptional.Some(q)
	return cfg
}

// consumeConcurrently sends one batch of spansEach spans from each of n
// goroutines at once and returns each call's error.
func consumeConcurrently(te *testExporters, n, spansEach int) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = te.traces.ConsumeTraces(context.Background(), megatronTraces(1, spansEach)) })
	}
	wg.Wait()
	return errs
}

// TestGroupCommitOneFsyncForConcurrentRequests: 16 concurrent requests of
// 10 spans each, a batch that closes at 160 items: each call returns only
// once its spans are in the file, and all 16 share one write and one fsync.
func TestGroupCommitOneFsyncForConcurrentRequests(t *testing.T) {
	const requests, spansEach = 16, 10
	dir := t.TempDir()
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) }) //nolint:usetesting // t.Context() is canceled before Cleanup runs
	// The timeout only guards the test: min_size closes the batch.
	te := startExporters(t, durableConfig(dir, requests*spansEach, time.Minute), metadatatest.NewSettings(tt))

	for i, err := range consumeConcurrently(te, requests, spansEach) {
		require.NoError(t, err, "request %d", i)
	}
	// Returned means written: the lines are there before shutdown.
	assert.Equal(t, requests*spansEach, countLines(t, filepath.Join(dir, "traces.jsonl")))
	metadatatest.AssertEqualExporterJsonlFileFsyncs(t, tt,
		[]metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
}

// TestGroupCommitFlushTimeoutBoundsTheWait: a lone request in a batch that
// would close at 1,000,000 items is written after flush_timeout.
func TestGroupCommitFlushTimeoutBoundsTheWait(t *testing.T) {
	dir := t.TempDir()
	te := startExporters(t, durableConfig(dir, 1_000_000, 20*time.Millisecond), nopSettings())
	require.NoError(t, te.traces.ConsumeTraces(t.Context(), megatronTraces(1, 5)))
	assert.Equal(t, 5, countLines(t, filepath.Join(dir, "traces.jsonl")))
}

// TestGroupCommitFailureReachesEveryWaiter: when the shared write fails,
// every request merged into it gets the error (none is acknowledged).
func TestGroupCommitFailureReachesEveryWaiter(t *testing.T) {
	const requests, spansEach = 8, 10
	dir := t.TempDir()
	blocker := filepath.Join(dir, "blocker")
	require.NoError(t, os.WriteFile(blocker, nil, 0o600))
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) }) //nolint:usetesting // t.Context() is canceled before Cleanup runs
	// A directory below a regular file: the write can never succeed.
	te := startExporters(t, durableConfig(filepath.Join(blocker, "out"), requests*spansEach, time.Minute), metadatatest.NewSettings(tt))

	for i, err := range consumeConcurrently(te, requests, spansEach) {
		assert.Error(t, err, "request %d was acknowledged though nothing was written", i)
	}
	_, err := tt.GetMetric("otelcol_exporter_jsonl_file_fsyncs")
	assert.Error(t, err, "no fsync can have succeeded")
}

// TestSharedFileCreditsEachSignal: traces and logs written to one buffered
// file are each counted by their own signal's metrics, records and bytes.
func TestSharedFileCreditsEachSignal(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.TracesPath = "all.jsonl"
	cfg.LogsPath = "all.jsonl"
	cfg.FlushInterval = time.Hour // everything waits in one buffer until shutdown
	tracesTel, logsTel := componenttest.NewTelemetry(), componenttest.NewTelemetry()
	//nolint:usetesting // t.Context() is canceled before Cleanup runs
	t.Cleanup(func() {
		require.NoError(t, tracesTel.Shutdown(context.Background()))
		require.NoError(t, logsTel.Shutdown(context.Background()))
	})
	f := NewFactory()
	ctx := t.Context()
	traces, err := f.CreateTraces(ctx, metadatatest.NewSettings(tracesTel), cfg)
	require.NoError(t, err)
	logs, err := f.CreateLogs(ctx, metadatatest.NewSettings(logsTel), cfg)
	require.NoError(t, err)
	require.NoError(t, traces.Start(ctx, componenttest.NewNopHost()))
	require.NoError(t, logs.Start(ctx, componenttest.NewNopHost()))
	require.NoError(t, traces.ConsumeTraces(ctx, megatronTraces(1, 30)))
	require.NoError(t, logs.ConsumeLogs(ctx, megatronLogs(1, 7)))
	require.NoError(t, logs.Shutdown(ctx))
	require.NoError(t, traces.Shutdown(ctx)) // the last user flushes the shared file

	require.Equal(t, 37, countLines(t, filepath.Join(dir, "all.jsonl")))
	opts := []metricdatatest.Option{metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars()}
	metadatatest.AssertEqualExporterJsonlFileRecordsWritten(t, tracesTel, []metricdata.DataPoint[int64]{{Value: 30}}, opts...)
	metadatatest.AssertEqualExporterJsonlFileRecordsWritten(t, logsTel, []metricdata.DataPoint[int64]{{Value: 7}}, opts...)
	tracesBytes := sumOf(t, tracesTel, "otelcol_exporter_jsonl_file_bytes_written")
	logsBytes := sumOf(t, logsTel, "otelcol_exporter_jsonl_file_bytes_written")
	assert.Equal(t, fileSize(t, filepath.Join(dir, "all.jsonl")), tracesBytes+logsBytes)
	assert.Positive(t, logsBytes, "the logs' bytes were credited to traces")
}

// sumOf returns the value of an int64 sum the exporter records.
func sumOf(t *testing.T, tt *componenttest.Telemetry, name string) int64 {
	t.Helper()
	m, err := tt.GetMetric(name)
	require.NoError(t, err)
	var v int64
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		v += dp.Value
	}
	return v
}

// TestMaxDistinctPathsSendsNewPathsToTheOverflowFile: with room for 3
// paths, the first three runs get their files, the next two runs' records
// go to _overflow/traces.jsonl (counted, logged once), and the known runs
// keep their files.
func TestMaxDistinctPathsSendsNewPathsToTheOverflowFile(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.TracesPath = "{nemo.run.id}/traces.jsonl"
	cfg.MaxDistinctPaths = 3
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) }) //nolint:usetesting // t.Context() is canceled before Cleanup runs
	te := startExporters(t, cfg, metadatatest.NewSettings(tt))
	ctx := t.Context()
	send := func(run string) {
		require.NoError(t, te.traces.ConsumeTraces(ctx, runTraces(map[string]any{"nemo.run.id": run})))
	}
	for i := range 5 {
		send(fmt.Sprintf("run-%d", i))
	}
	send("run-0")
	te.shutdown()

	for i := range 3 {
		want := 3
		if i == 0 {
			want = 6
		}
		assert.Equal(t, want, countLines(t, filepath.Join(dir, fmt.Sprintf("run-%d", i), "traces.jsonl")), "run-%d", i)
	}
	for i := 3; i < 5; i++ {
		assert.NoDirExists(t, filepath.Join(dir, fmt.Sprintf("run-%d", i)))
	}
	assert.Equal(t, 6, countLines(t, filepath.Join(dir, "_overflow", "traces.jsonl")))
	metadatatest.AssertEqualExporterJsonlFileOverflowRecords(t, tt,
		[]metricdata.DataPoint[int64]{{Value: 6}}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
	logged := te.logged.FilterMessageSnippet("max_distinct_paths").All()
	require.Len(t, logged, 1, "the warning is rate-limited")
	assert.Equal(t, filepath.Join(dir, "_overflow", "traces.jsonl"), logged[0].ContextMap()["overflow_file"])
}

// TestRecentPathsForgetQuietPaths: a path counts for one to two windows
// after its last write, so a long-lived collector admits new runs as old
// ones go quiet.
func TestRecentPathsForgetQuietPaths(t *testing.T) {
	p := newRecentPaths(2)
	t0 := time.Unix(1_700_000_000, 0)
	require.True(t, p.admit("a", t0))
	require.True(t, p.admit("b", t0))
	require.False(t, p.admit("c", t0), "full")
	require.True(t, p.admit("a", t0.Add(pathWindow)), "known paths stay admitted")
	require.False(t, p.admit("c", t0.Add(pathWindow)), "b is still recent")
	require.True(t, p.admit("c", t0.Add(2*pathWindow)), "b went quiet for a whole window")
	unbounded := newRecentPaths(0)
	require.True(t, unbounded.admit("anything", t0), "0 disables the bound")
}

// TestStartRepairsCutLastLinesOfFilesNotWrittenAgain: a kill can cut a
// file's last line mid-write; the next start removes that line even from a
// file this run never writes to (here: a run that has ended).
func TestStartRepairsCutLastLinesOfFilesNotWrittenAgain(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run-ended", "traces.jsonl")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o750))
	require.NoError(t, os.WriteFile(path, []byte("{\"a\":1}\n{\"a\":2}\n{\"a\":"), 0o600))
	cfg := testConfig(dir)
	cfg.TracesPath = "{nemo.run.id}/traces.jsonl"
	te := startExporters(t, cfg, nopSettings())
	te.shutdown()
	assert.Equal(t, 2, countLines(t, path))
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "{\"a\":1}\n{\"a\":2}\n", string(raw))
}
