// Package goldentest runs a traces processor or a traces-to-metrics
// connector over testdata/<case>/input.yaml and compares what it passes on
// with testdata/<case>/expected.yaml, the way contrib's connector and
// processor tests use pkg/golden: one place for the golden-file cases of
// every component of this repository.
package goldentest // import "github.com/nemo-lens/otelcol-nemo/internal/goldentest"

import (
	"flag"
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
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
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

// WriteInput writes dir/input.yaml from build under -update, for cases
// whose input is built by code (internal/lensfixture); otherwise it does
// nothing and the committed input is what the runner reads.
func WriteInput(t *testing.T, dir string, build func() ptrace.Traces) {
	t.Helper()
	if *Update {
		require.NoError(t, golden.WriteTraces(t, filepath.Join(dir, "input.yaml"), build()))
	}
}

// Traces runs dir/input.yaml through a traces processor that factory builds
// from cfg, in one batch, and compares everything it passes on (shutdown
// included) with dir/expected.yaml, ignoring the order of resources, scopes
// and spans.
func Traces(t *testing.T, factory processor.Factory, cfg component.Config, dir string) {
	t.Helper()
	sink := new(consumertest.TracesSink)
	tp, err := factory.CreateTraces(t.Context(), processortest.NewNopSettings(factory.Type()), cfg, sink)
	require.NoError(t, err)
	feed(t, tp, dir)
	got := ptrace.NewTraces()
	for _, td := range sink.AllTraces() {
		td.ResourceSpans().MoveAndAppendTo(got.ResourceSpans())
	}

	expectedFile := filepath.Join(dir, "expected.yaml")
	if *Update {
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
// resources, scopes, metrics and data points.
func TracesToMetrics(t *testing.T, factory connector.Factory, cfg component.Config, dir string) {
	t.Helper()
	sink := new(consumertest.MetricsSink)
	c, err := factory.CreateTracesToMetrics(t.Context(), connectortest.NewNopSettings(factory.Type()), cfg, sink)
	require.NoError(t, err)
	feed(t, c, dir)
	got := pmetric.NewMetrics()
	for _, md := range sink.AllMetrics() {
		md.ResourceMetrics().MoveAndAppendTo(got.ResourceMetrics())
	}

	expectedFile := filepath.Join(dir, "expected.yaml")
	if *Update {
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

// feed runs a component's whole life over dir/input.yaml: start, the input
// as one batch, shutdown (which flushes what it still holds).
func feed(t *testing.T, c interface {
	component.Component
	consumer.Traces
}, dir string,
) {
	t.Helper()
	input, err := golden.ReadTraces(filepath.Join(dir, "input.yaml"))
	require.NoError(t, err)
	ctx := t.Context()
	require.NoError(t, c.Start(ctx, componenttest.NewNopHost()))
	require.NoError(t, c.ConsumeTraces(ctx, input))
	require.NoError(t, c.Shutdown(ctx))
}
