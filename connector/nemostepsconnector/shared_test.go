// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsconnector

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector/internal/metadata"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
)

// The traces-to-metrics and traces-to-logs halves of one id share one
// connector: the collector sends each half the same traces, and the steps
// are counted once; a second id gets a connector of its own.
func TestHalvesShareOneConnector(t *testing.T) {
	f := NewFactory()
	set := connectortest.NewNopSettings(metadata.Type)
	cfg := createDefaultConfig()
	metrics, logs := new(consumertest.MetricsSink), new(consumertest.LogsSink)
	tm, err := f.CreateTracesToMetrics(t.Context(), set, cfg, metrics)
	require.NoError(t, err)
	tl, err := f.CreateTracesToLogs(t.Context(), set, cfg, logs)
	require.NoError(t, err)
	assert.Same(t, tm.(*half).Component, tl.(*half).Component)

	other := connectortest.NewNopSettings(metadata.Type)
	other.ID = component.NewIDWithName(metadata.Type, "other")
	to, err := f.CreateTracesToMetrics(t.Context(), other, cfg, metrics)
	require.NoError(t, err)
	assert.NotSame(t, tm.(*half).Component, to.(*half).Component)
	host := componenttest.NewNopHost()
	require.NoError(t, tm.Start(t.Context(), host))
	require.NoError(t, tl.Start(t.Context(), host))

	job := syncJob{run: "run-shared", world: 2}
	td := job.batch(ownRoot, 1, lensfixture.WholeStep, 0, 1)
	require.NoError(t, tm.ConsumeTraces(t.Context(), td))
	require.NoError(t, tl.ConsumeTraces(t.Context(), td))

	require.NoError(t, tl.Shutdown(t.Context()))
	require.NoError(t, tm.Shutdown(t.Context())) // the last half decides and sends
	durations := 0
	for _, md := range metrics.AllMetrics() {
		for _, rm := range md.ResourceMetrics().All() {
			for _, sm := range rm.ScopeMetrics().All() {
				for _, m := range sm.Metrics().All() {
					if m.Name() == "nemo.step.duration" {
						durations += m.Gauge().DataPoints().Len()
					}
				}
			}
		}
	}
	assert.Equal(t, 2, durations, "one step of two ranks, read once although both halves got it")
}
