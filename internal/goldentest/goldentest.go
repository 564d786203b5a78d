// Package goldentest runs a traces processor or a traces-to-metrics
// connector over testdata/<case>/input.yaml and compares what it passes on
// with testdata/<case>/expected.yaml, the way contrib's connector and
// processor tests use pkg/golden: one place for the golden-file cases of
// every component of this repository.
package goldentest // import "github.com/nemo-lens/otelcol-nemo/internal/goldentest"

import (
	"path/filepath"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
)

// Traces runs dir/input.yaml through a traces processor that factory builds
// from cfg, in one batch, and compares everything it passes on (shutdown
// included) with dir/expected.yaml, ignoring the order of resources, scopes
// and spans. With update it writes dir/expected.yaml from the output
// instead: read the result before keeping it.
func Traces(t *testing.T, factory processor.Factory, cfg component.Config, dir string, update bool) {
	t.Helper()
	input, err := golden.ReadTraces(filepath.Join(dir, "input.yaml"))
	require.NoError(t, err)

	ctx := t.Context()
	sink := new(consumertest.TracesSink)
	tp, err := factory.CreateTraces(ctx, processortest.NewNopSettings(factory.Type()), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, tp.Start(ctx, componenttest.NewNopHost()))
	require.NoError(t, tp.ConsumeTraces(ctx, input))
	require.NoError(t, tp.Shutdown(ctx))
	got := ptrace.NewTraces()
	for _, td := range sink.AllTraces() {
		td.ResourceSpans().MoveAndAppendTo(got.ResourceSpans())
	}

	expectedFile := filepath.Join(dir, "expected.yaml")
	if update {
		require.NoError(t, golden.WriteTraces(t, expectedFile, got))
		return
	}
	want, err := golden.ReadTraces(expectedFile)
	require.NoError(t, err)
	require.NoError(t, ptracetest.CompareTraces(want, got,
		ptracetest.IgnoreResourceSpansOrder(),
		ptracetest.IgnoreScopeSpansOrder(),
		ptracetest.IgnoreSpansOrder()))
}

// TracesToMetrics runs dir/input.yaml through a traces-to-metrics connector
// that factory builds from cfg, in one batch, and compares every metric it
// sends (shutdown included) with dir/expected.yaml, ignoring the order of
// resources, scopes, metrics and data points. update works as in Traces.
func TracesToMetrics(t *testing.T, factory connector.Factory, cfg component.Config, dir string, update bool) {
	t.Helper()
	input, err := golden.ReadTraces(filepath.Join(dir, "input.yaml"))
	require.NoError(t, err)

	ctx := t.Context()
	sink := new(consumertest.MetricsSink)
	c, err := factory.CreateTracesToMetrics(ctx, connectortest.NewNopSettings(factory.Type()), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, c.Start(ctx, componenttest.NewNopHost()))
	require.NoError(t, c.ConsumeTraces(ctx, input))
	require.NoError(t, c.Shutdown(ctx))
	got := pmetric.NewMetrics()
	for _, md := range sink.AllMetrics() {
		md.ResourceMetrics().MoveAndAppendTo(got.ResourceMetrics())
	}

	expectedFile := filepath.Join(dir, "expected.yaml")
	if update {
		// The points' timestamps are the steps' ends: part of what is
		// checked, so they are written as they are.
		require.NoError(t, golden.WriteMetrics(t, expectedFile, got, golden.SkipMetricTimestampNormalization()))
		return
	}
	want, err := golden.ReadMetrics(expectedFile)
	require.NoError(t, err)
	require.NoError(t, pmetrictest.CompareMetrics(want, got,
		pmetrictest.IgnoreResourceMetricsOrder(),
		pmetrictest.IgnoreScopeMetricsOrder(),
		pmetrictest.IgnoreMetricsOrder(),
		pmetrictest.IgnoreMetricDataPointsOrder()))
}
