// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsprocessor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/clocktest"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/spantest"
	"github.com/nemo-lens/otelcol-nemo/processor/nemostepsprocessor/internal/metadatatest"
)

// harness runs the processor on a fake clock and captures what it sends.
type harness struct {
	t    *testing.T
	clk  *clocktest.Fake
	sink *consumertest.MetricsSink
	c    *stepsProcessor
	tel  *componenttest.Telemetry
}

// newHarness runs the processor with goodput off unless edit turns it on:
// the tests of the step metrics and stalls count every point.
func newHarness(t *testing.T, edit func(*Config)) *harness {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.Goodput = configoptional.None[GoodputConfig]()
	if edit != nil {
		edit(cfg)
	}
	require.NoError(t, cfg.Validate())
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) }) //nolint:usetesting // t.Context() is canceled before Cleanup runs
	h := &harness{t: t, clk: clocktest.NewFake(), sink: new(consumertest.MetricsSink), tel: tel}
	c, err := newProcessor(metadatatest.NewSettings(tel), cfg, h.clk)
	require.NoError(t, err)
	c.next = h.sink
	require.NoError(t, c.Start(t.Context(), componenttest.NewNopHost()))
	h.c = c
	t.Cleanup(func() { require.NoError(t, c.Shutdown(context.Background())) }) //nolint:usetesting // t.Context() is canceled before Cleanup runs; a second Shutdown is harmless
	return h
}

func (h *harness) consume(td ptrace.Traces) {
	h.t.Helper()
	td.MarkReadOnly() // the processor must not change what it reads
	require.NoError(h.t, h.c.ConsumeTraces(context.Background(), td))
}

func (h *harness) shutdown() {
	h.t.Helper()
	require.NoError(h.t, h.c.Shutdown(context.Background()))
}

// point is one data point as a backend sees it.
type point struct {
	metric   string
	unit     string
	resource map[string]any
	attrs    map[string]any
	value    float64
	start    pcommon.Timestamp
	ts       pcommon.Timestamp
	sum      bool
}

// points flattens everything the processor sent so far.
func (h *harness) points() []point {
	var out []point
	for _, md := range h.sink.AllMetrics() {
		rms := md.ResourceMetrics()
		for i := 0; i < rms.Len(); i++ {
			res := rms.At(i).Resource().Attributes().AsRaw()
			sms := rms.At(i).ScopeMetrics()
			for j := 0; j < sms.Len(); j++ {
				ms := sms.At(j).Metrics()
				for k := 0; k < ms.Len(); k++ {
					out = append(out, pointsOf(ms.At(k), res)...)
				}
			}
		}
	}
	return out
}

func pointsOf(m pmetric.Metric, res map[string]any) []point {
	var out []point
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		dps := m.Gauge().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dp := dps.At(i)
			out = append(out, point{
				metric: m.Name(), unit: m.Unit(), resource: res, attrs: dp.Attributes().AsRaw(),
				value: dp.DoubleValue(), start: dp.StartTimestamp(), ts: dp.Timestamp(),
			})
		}
	case pmetric.MetricTypeSum:
		dps := m.Sum().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dp := dps.At(i)
			out = append(out, point{
				metric: m.Name(), unit: m.Unit(), resource: res, attrs: dp.Attributes().AsRaw(),
				value: numberOf(dp), start: dp.StartTimestamp(), ts: dp.Timestamp(), sum: true,
			})
		}
	}
	return out
}

// numberOf is a point's value, int or double.
func numberOf(dp pmetric.NumberDataPoint) float64 {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
		return float64(dp.IntValue())
	}
	return dp.DoubleValue()
}

// byMetricRank indexes gauge points by metric and rank (nv.dl.rank), in
// the order they were sent.
func byMetricRank(points []point) map[string]map[int64][]point {
	out := map[string]map[int64][]point{}
	for _, p := range points {
		r, ok := p.attrs["nv.dl.rank"].(int64)
		if !ok {
			continue
		}
		if out[p.metric] == nil {
			out[p.metric] = map[int64][]point{}
		}
		out[p.metric][r] = append(out[p.metric][r], p)
	}
	return out
}

func named(points []point, name string) []point {
	var out []point
	for _, p := range points {
		if p.metric == name {
			out = append(out, p)
		}
	}
	return out
}

// inJob and ownRoot are the shapes of the tests that need only one: steps
// named megatron.train_step under the run-long job span, or each its own
// trace root.
var (
	inJob   = lensfixture.Shape{StepName: attrkey.MegatronTrainStep}
	ownRoot = lensfixture.Shape{StepName: attrkey.MegatronTrainStep, StepsAreRoots: true}
)

// waitSpans counts the spans of td that the default wait_spans match: the
// spans a rank's busy time leaves out.
func waitSpans(t *testing.T, td ptrace.Traces) int {
	t.Helper()
	waits, err := steps.ParsePatterns(createDefaultConfig().(*Config).WaitSpans)
	require.NoError(t, err)
	n := 0
	for _, s := range spantest.All(td) {
		if waits.Match(s.Name()) {
			n++
		}
	}
	return n
}

// resourceValue is what rank sends as resource attribute key, nil if none.
func resourceValue(rank lensfixture.Rank, key string) any {
	for _, kv := range rank.Attributes() {
		if kv.Key == key {
			return kv.Value
		}
	}
	return nil
}
