// Package goldentest runs a traces processor over testdata/<case>/input.yaml
// and compares what it passes on with testdata/<case>/expected.yaml, the way
// contrib's connector and processor tests use pkg/golden: one place for the
// golden-file cases of every processor of this repository.
package goldentest // import "github.com/nemo-lens/otelcol-nemo/internal/goldentest"

import (
	"path/filepath"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
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
