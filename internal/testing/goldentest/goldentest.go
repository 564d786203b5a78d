// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package goldentest runs a processor or a traces-to-metrics connector over
// testdata/<case>/input.yaml and compares what it passes on with
// testdata/<case>/expected.yaml, the way contrib's connector and processor
// tests use pkg/golden: one place for the golden-file cases of every
// component of this repository.
package goldentest // import "github.com/nemo-lens/otelcol-nemo/internal/testing/goldentest"

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/plogtest"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
)

// Update is the -update flag of every test binary that imports this
// package (go test -run TestGolden -update): the runners write
// expected.yaml from the output, and WriteInput writes input.yaml, instead
// of comparing. Read the diff before keeping it.
var Update = flag.Bool("update", false, "write testdata/<case>/{input,expected} files from the code instead of comparing")

// Signal is what a case's input and expected output hold.
type Signal interface {
	ptrace.Traces | pmetric.Metrics | plog.Logs
}

// WriteInput writes dir/input.yaml from build under -update, for cases
// whose input is built by code (internal/testing/lensfixture); otherwise it does
// nothing and the committed input is what the runner reads.
func WriteInput[T Signal](t *testing.T, dir string, build func() T) {
	t.Helper()
	if *Update {
		require.NoError(t, write(t, filepath.Join(dir, "input.yaml"), build()))
	}
}

// WriteBatches is WriteInput for a case fed in batches (see Batches): it
// writes dir/input_1.yaml, input_2.yaml, ... one file per batch.
func WriteBatches[T Signal](t *testing.T, dir string, build func() []T) {
	t.Helper()
	if *Update {
		for i, batch := range build() {
			require.NoError(t, write(t, batchFile(dir, i+1), batch))
		}
	}
}

// Option changes how a runner feeds a case.
type Option func(*feedOptions)

type feedOptions struct {
	batches int
	after   func(batch int)
}

// Batches feeds the case as n batches, dir/input_1.yaml to
// dir/input_<n>.yaml in that order, instead of dir/input.yaml in one, and
// calls after(i) once batch i is consumed, before the next batch and
// before shutdown. A component that decides on a ticker runs on a fake
// clock (internal/testing/clocktest) that after moves, so that the case says
// which decisions fall between which batches.
func Batches(n int, after func(batch int)) Option {
	return func(o *feedOptions) { o.batches, o.after = n, after }
}

// Traces runs dir's input through a traces processor that factory builds
// from cfg, in one batch unless opts say otherwise, and compares everything
// it passes on (shutdown included) with dir/expected.yaml, ignoring the
// order of resources, scopes and spans.
func Traces(t *testing.T, factory processor.Factory, cfg component.Config, dir string, opts ...Option) {
	t.Helper()
	sink := new(consumertest.TracesSink)
	tp, err := factory.CreateTraces(t.Context(), processortest.NewNopSettings(factory.Type()), cfg, sink)
	require.NoError(t, err)
	feed(t, tp, tp.ConsumeTraces, dir, opts)
	check(t, dir, mergeTraces(sink.AllTraces()), func(want, got ptrace.Traces) error {
		return ptracetest.CompareTraces(want, got,
			ptracetest.IgnoreResourceSpansOrder(),
			ptracetest.IgnoreScopeSpansOrder(),
			ptracetest.IgnoreSpansOrder())
	})
}

// Metrics is Traces for a metrics processor, ignoring the order of
// resources, scopes, metrics and data points.
func Metrics(t *testing.T, factory processor.Factory, cfg component.Config, dir string, opts ...Option) {
	t.Helper()
	sink := new(consumertest.MetricsSink)
	mp, err := factory.CreateMetrics(t.Context(), processortest.NewNopSettings(factory.Type()), cfg, sink)
	require.NoError(t, err)
	feed(t, mp, mp.ConsumeMetrics, dir, opts)
	check(t, dir, mergeMetrics(sink.AllMetrics()), compareMetrics)
}

// Logs is Traces for a logs processor, ignoring the order of resources,
// scopes and log records.
func Logs(t *testing.T, factory processor.Factory, cfg component.Config, dir string, opts ...Option) {
	t.Helper()
	sink := new(consumertest.LogsSink)
	lp, err := factory.CreateLogs(t.Context(), processortest.NewNopSettings(factory.Type()), cfg, sink)
	require.NoError(t, err)
	feed(t, lp, lp.ConsumeLogs, dir, opts)
	check(t, dir, mergeLogs(sink.AllLogs()), func(want, got plog.Logs) error {
		return plogtest.CompareLogs(want, got,
			plogtest.IgnoreResourceLogsOrder(),
			plogtest.IgnoreScopeLogsOrder(),
			plogtest.IgnoreLogRecordsOrder())
	})
}

// ProcessorToReceiver runs dir's input through a traces processor that
// sends what it finds through the receiver of the same id (nemo_steps), as
// the collector builds them: the receiver in a metrics and a logs pipeline,
// all created, then started, fed every batch and shut down, the processor
// first. In one batch unless opts say otherwise. The processor must pass
// every span on. It compares every metric sent (shutdown included) with
// dir/expected.yaml, and every log record with dir/expected_logs.yaml when
// the case has one, ignoring order.
func ProcessorToReceiver(t *testing.T, pf processor.Factory, rf receiver.Factory, cfg component.Config, dir string, opts ...Option) {
	t.Helper()
	metrics, logs, traces := new(consumertest.MetricsSink), new(consumertest.LogsSink), new(consumertest.TracesSink)
	rset := receivertest.NewNopSettings(rf.Type())
	rset.ID = component.NewID(rf.Type()) // the processor's id: the pair's
	toMetrics, err := rf.CreateMetrics(t.Context(), rset, rf.CreateDefaultConfig(), metrics)
	require.NoError(t, err)
	toLogs, err := rf.CreateLogs(t.Context(), rset, rf.CreateDefaultConfig(), logs)
	require.NoError(t, err)
	tp, err := pf.CreateTraces(t.Context(), processortest.NewNopSettings(pf.Type()), cfg, traces)
	require.NoError(t, err)
	sent := 0
	feed(t, chain{tp, toMetrics, toLogs}, func(ctx context.Context, td ptrace.Traces) error {
		td.MarkReadOnly() // the processor must not change what it reads
		sent += td.SpanCount()
		return tp.ConsumeTraces(ctx, td)
	}, dir, opts)
	require.Equal(t, sent, traces.SpanCount(), "the processor passes every span on")
	check(t, dir, mergeMetrics(metrics.AllMetrics()), compareMetrics)
	logsFile := filepath.Join(dir, "expected_logs.yaml")
	if _, err := os.Stat(logsFile); err != nil && !*Update {
		return // a case without records
	}
	checkFile(t, logsFile, mergeLogs(logs.AllLogs()), func(want, got plog.Logs) error {
		return plogtest.CompareLogs(want, got,
			plogtest.IgnoreResourceLogsOrder(),
			plogtest.IgnoreScopeLogsOrder(),
			plogtest.IgnoreLogRecordsOrder())
	})
}

// chain is components started in order and shut down in the same order.
type chain []component.Component

func (c chain) Start(ctx context.Context, host component.Host) error {
	for _, comp := range c {
		if err := comp.Start(ctx, host); err != nil {
			return err
		}
	}
	return nil
}

func (c chain) Shutdown(ctx context.Context) error {
	for _, comp := range c {
		if err := comp.Shutdown(ctx); err != nil {
			return err
		}
	}
	return nil
}

func mergeTraces(batches []ptrace.Traces) ptrace.Traces {
	got := ptrace.NewTraces()
	for _, td := range batches {
		td.ResourceSpans().MoveAndAppendTo(got.ResourceSpans())
	}
	return got
}

func mergeLogs(batches []plog.Logs) plog.Logs {
	got := plog.NewLogs()
	for _, ld := range batches {
		ld.ResourceLogs().MoveAndAppendTo(got.ResourceLogs())
	}
	return got
}

func mergeMetrics(batches []pmetric.Metrics) pmetric.Metrics {
	got := pmetric.NewMetrics()
	for _, md := range batches {
		md.ResourceMetrics().MoveAndAppendTo(got.ResourceMetrics())
	}
	return got
}

func compareMetrics(want, got pmetric.Metrics) error {
	return pmetrictest.CompareMetrics(want, got,
		pmetrictest.IgnoreResourceMetricsOrder(),
		pmetrictest.IgnoreScopeMetricsOrder(),
		pmetrictest.IgnoreMetricsOrder(),
		pmetrictest.IgnoreMetricDataPointsOrder())
}

// check compares got with dir/expected.yaml, or writes it there under
// -update.
func check[T Signal](t *testing.T, dir string, got T, compare func(want, got T) error) {
	t.Helper()
	checkFile(t, filepath.Join(dir, "expected.yaml"), got, compare)
}

// checkFile compares got with expectedFile, or writes it there under
// -update.
func checkFile[T Signal](t *testing.T, expectedFile string, got T, compare func(want, got T) error) {
	t.Helper()
	if *Update {
		require.NoError(t, write(t, expectedFile, got))
		return
	}
	want, err := read[T](expectedFile)
	require.NoError(t, err)
	require.NoError(t, compare(want, got))
}

// feed runs a component's whole life over dir's input: start, the input as
// one batch or as opts' batches, shutdown (which flushes what it still
// holds).
func feed[T Signal](t *testing.T, c component.Component, consume func(context.Context, T) error, dir string, opts []Option) {
	t.Helper()
	var o feedOptions
	for _, opt := range opts {
		opt(&o)
	}
	files := []string{filepath.Join(dir, "input.yaml")}
	if o.batches > 0 {
		files = files[:0]
		for i := 1; i <= o.batches; i++ {
			files = append(files, batchFile(dir, i))
		}
	}
	inputs := make([]T, len(files))
	for i, file := range files {
		var err error
		inputs[i], err = read[T](file)
		require.NoError(t, err)
	}
	ctx := t.Context()
	require.NoError(t, c.Start(ctx, componenttest.NewNopHost()))
	for i, input := range inputs {
		require.NoError(t, consume(ctx, input))
		if o.after != nil {
			o.after(i + 1)
		}
	}
	require.NoError(t, c.Shutdown(ctx))
}

func batchFile(dir string, batch int) string {
	return filepath.Join(dir, fmt.Sprintf("input_%d.yaml", batch))
}

func read[T Signal](file string) (T, error) {
	var v any
	var err error
	var zero T
	switch any(zero).(type) {
	case ptrace.Traces:
		v, err = golden.ReadTraces(file)
	case pmetric.Metrics:
		v, err = golden.ReadMetrics(file)
	case plog.Logs:
		v, err = golden.ReadLogs(file)
	}
	if err != nil {
		return zero, err
	}
	return v.(T), nil
}

// write writes a golden file, creating its case's directory for a new case.
func write[T Signal](t *testing.T, file string, data T) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o750); err != nil {
		return err
	}
	switch d := any(data).(type) {
	case ptrace.Traces:
		return golden.WriteTraces(t, file, d)
	case pmetric.Metrics:
		// Timestamps are part of what is checked (a connector's points are
		// stamped at the steps' ends; a processor passes its input's on),
		// so they are written as they are.
		return golden.WriteMetrics(t, file, d, golden.SkipMetricTimestampNormalization())
	case plog.Logs:
		return golden.WriteLogs(t, file, d)
	}
	return nil
}
