// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter/internal/metadata"
	"github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter/internal/metadatatest"
	"github.com/nemo-lens/otelcol-nemo/internal/sharedcomponent"
)

func TestUnwritablePathIsPermanentAndLogged(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "blocker")
	require.NoError(t, os.WriteFile(blocker, nil, 0o600))
	cfg := testConfig(filepath.Join(blocker, "out")) // a directory below a regular file
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) }) //nolint:usetesting // t.Context() is canceled before Cleanup runs
	te := startExporters(t, cfg, metadatatest.NewSettings(tt))

	err := te.traces.ConsumeTraces(t.Context(), megatronTraces(1, 5))
	require.Error(t, err)
	assert.True(t, consumererror.IsPermanent(err), "retrying cannot fix %v", err)
	want := filepath.Join(blocker, "out", "traces.jsonl")
	assert.Contains(t, err.Error(), want)
	logged := te.logged.FilterMessage("Dropping records: the file cannot be written").All()
	require.Len(t, logged, 1)
	assert.Equal(t, want, logged[0].ContextMap()["path"])
	metadatatest.AssertEqualExporterJsonlFileErrors(t, tt, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("operation", "open"))},
	}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
}

func TestPartialFailureRetriesOnlyFailedResources(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.TracesPath = "{nemo.run.id}/traces.jsonl"
	cfg.FlushInterval = 0
	// run-bad's file is a directory: opening it fails for good.
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "run-bad", "traces.jsonl"), 0o750))
	te := startExporters(t, cfg, nopSettings())
	err := te.traces.ConsumeTraces(t.Context(), runTraces(
		map[string]any{"nemo.run.id": "run-ok"},
		map[string]any{"nemo.run.id": "run-bad"},
	))
	require.Error(t, err)
	assert.True(t, consumererror.IsPermanent(err))
	assert.Equal(t, 3, countLines(t, filepath.Join(dir, "run-ok", "traces.jsonl")), "the good run is written")
}

func TestRetryableFailureRetriesOnlyFailedResources(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.TracesPath = "{nemo.run.id}.jsonl"
	cfg.FlushInterval = time.Hour
	cfg.MaxOpenFiles = 1
	shared, err := sharedcomponent.NewMap[*Config, *jsonlExporter](sharedcomponent.WithLast).Acquire(cfg, func() (*jsonlExporter, error) {
		return newJSONLExporter(cfg, zap.NewNop())
	})
	require.NoError(t, err)
	tmpl, err := parsePathTemplate(cfg.TracesPath)
	require.NoError(t, err)
	tb, err := metadata.NewTelemetryBuilder(componenttest.NewNopTelemetrySettings())
	require.NoError(t, err)
	se := &signalExporter{jsonlExporter: shared.Unwrap(), shared: shared, tmpl: tmpl, tel: newTelemetry(tb), tb: tb, logger: zap.NewNop()}

	// run-a's file holds buffered records and, from now on, refuses writes
	// (a read-only handle: EBADF, an error worth retrying). With one open
	// file allowed, run-b cannot get a file until run-a's records are out.
	require.NoError(t, se.writer.write("run-a.jsonl", se.overflow, []byte("{\"early\":1}\n"), 1, se.tel))
	of := se.writer.files["run-a.jsonl"]
	require.NoError(t, of.f.Close())
	of.f, err = os.Open(filepath.Join(dir, "run-a.jsonl"))
	require.NoError(t, err)

	td := runTraces(map[string]any{"nemo.run.id": "run-a"}, map[string]any{"nemo.run.id": "run-b"})
	req := tracesSignal.newRequest(td)
	err = push(se, tracesSignal)(t.Context(), req)
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err))
	assert.Contains(t, err.Error(), "max_open_files (1)")
	var retry consumererror.Traces
	require.ErrorAs(t, err, &retry)
	require.Equal(t, 1, retry.Data().ResourceSpans().Len(), "only run-b is retried; run-a was accepted")
	run, _ := retry.Data().ResourceSpans().At(0).Resource().Attributes().Get("nemo.run.id")
	assert.Equal(t, "run-b", run.Str())

	// What exporterhelper retries: run-b alone.
	again, ok := req.OnError(err).(*resourcesRequest[ptrace.Traces, ptrace.ResourceSpans])
	require.True(t, ok)
	require.Len(t, again.resources, 1)
	assert.Equal(t, 3, again.ItemsCount())

	// The disk recovers: the retry and the buffered records all arrive once.
	require.NoError(t, of.f.Close())
	of.f = nil
	require.NoError(t, push(se, tracesSignal)(t.Context(), again))
	require.NoError(t, se.shutdown(t.Context()))
	assert.Equal(t, 4, countLines(t, filepath.Join(dir, "run-a.jsonl")))
	assert.Equal(t, 3, countLines(t, filepath.Join(dir, "run-b.jsonl")))
}

func TestShutdownWithoutStart(t *testing.T) {
	cfg := testConfig(t.TempDir())
	exp, err := NewFactory().CreateTraces(t.Context(), nopSettings(), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Shutdown(t.Context()))
}

func TestWriteAfterShutdownIsRefused(t *testing.T) {
	cfg := testConfig(t.TempDir())
	set, err := newFileWriterSettings(cfg)
	require.NoError(t, err)
	w, err := newFileWriter(set, zap.NewNop())
	require.NoError(t, err)
	w.start()
	require.NoError(t, w.shutdown())
	err = w.write("traces.jsonl", "overflow.jsonl", []byte("{}\n"), 1, newTestTelemetry(t))
	require.Error(t, err)
	assert.True(t, consumererror.IsPermanent(err))
}

func TestErrorsAreClassified(t *testing.T) {
	_, err := os.Open(filepath.Join(t.TempDir(), "missing"))
	assert.False(t, consumererror.IsPermanent(classifyFileError(err)))
	f := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(f, nil, 0o600))
	_, err = os.Open(filepath.Join(f, "below"))
	assert.True(t, consumererror.IsPermanent(classifyFileError(err)))
	assert.ErrorIs(t, classifyFileError(err), err)
}
