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
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
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

// TracesToMetrics runs dir's input through a traces-to-metrics connector
// that factory builds from cfg, in one batch unless opts say otherwise, and
// compares every metric it sends (shutdown included) with
// dir/expected.yaml, ignoring the order of resources, scopes, metrics and
// data points.
func TracesToMetrics(t *testing.T, factory connector.Factory, cfg component.Config, dir string, opts ...Option) {
	t.Helper()
	sink := new(consumertest.MetricsSink)
	c, err := factory.CreateTracesToMetrics(t.Context(), connectortest.NewNopSettings(factory.Type()), cfg, sink)
	require.NoError(t, err)
	feed(t, c, c.ConsumeTraces, dir, opts)
	check(t, dir, mergeMetrics(sink.AllMetrics()), compareMetrics)
}

// TracesToMetricsAndLogs runs dir's input through a connector that is both
// traces-to-metrics and traces-to-logs under one id, as the collector
// builds it when one connector feeds a metrics and a logs pipeline: both
// are created, started, fed every batch and shut down, in that order. It
// compares every metric they send with dir/expected.yaml and every log
// record with dir/expected_logs.yaml, ignoring order.
func TracesToMetricsAndLogs(t *testing.T, factory connector.Factory, cfg component.Config, dir string, opts ...Option) {
	t.Helper()
	metrics, logs := new(consumertest.MetricsSink), new(consumertest.LogsSink)
	set := connectortest.NewNopSettings(factory.Type())
	toMetrics, err := factory.CreateTracesToMetrics(t.Context(), set, cfg, metrics)
	require.NoError(t, err)
	toLogs, err := factory.CreateTracesToLogs(t.Context(), set, cfg, logs)
	require.NoError(t, err)
	both := pair{toMetrics, toLogs}
	feed(t, both, both.ConsumeTraces, dir, opts)
	check(t, dir, mergeMetrics(metrics.AllMetrics()), compareMetrics)
	checkFile(t, filepath.Join(dir, "expected_logs.yaml"), mergeLogs(logs.AllLogs()), func(want, got plog.Logs) error {
		return plogtest.CompareLogs(want, got,
			plogtest.IgnoreResourceLogsOrder(),
			plogtest.IgnoreScopeLogsOrder(),
			plogtest.IgnoreLogRecordsOrder())
	})
}

// pair is the two signal pairs of one connector id, started, fed and shut
// down as the collector does it: each gets every batch.
type pair [2]connector.Traces

func (p pair) Start(ctx context.Context, host component.Host) error {
	for _, c := range p {
		if err := c.Start(ctx, host); err != nil {
			return err
		}
	}
	return nil
}

func (p pair) Shutdown(ctx context.Context) error {
	for _, c := range p {
		if err := c.Shutdown(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (p pair) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	td.MarkReadOnly() // two consumers of one batch: neither may change it
	for _, c := range p {
		if err := c.ConsumeTraces(ctx, td); err != nil {
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
