package nemostepsconnector

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector/internal/metadatatest"
	"github.com/nemo-lens/otelcol-nemo/internal/clock/clocktest"
)

// harness runs the connector on a fake clock and captures what it sends.
type harness struct {
	t    *testing.T
	clk  *clocktest.Fake
	sink *consumertest.MetricsSink
	c    *stepsConnector
	tel  *componenttest.Telemetry
}

func newHarness(t *testing.T, edit func(*Config)) *harness {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	if edit != nil {
		edit(cfg)
	}
	require.NoError(t, cfg.Validate())
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) }) //nolint:usetesting // t.Context() is canceled before Cleanup runs
	h := &harness{t: t, clk: clocktest.NewFake(), sink: new(consumertest.MetricsSink), tel: tel}
	c, err := newConnector(metadatatest.NewSettings(tel), cfg, h.sink, h.clk)
	require.NoError(t, err)
	require.NoError(t, c.Start(t.Context(), componenttest.NewNopHost()))
	h.c = c
	t.Cleanup(func() { require.NoError(t, c.Shutdown(context.Background())) }) //nolint:usetesting // t.Context() is canceled before Cleanup runs; a second Shutdown is harmless
	return h
}

func (h *harness) consume(td ptrace.Traces) {
	h.t.Helper()
	td.MarkReadOnly() // the connector must not change what it reads
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

// points flattens everything the connector sent so far.
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
				value: float64(dp.IntValue()), start: dp.StartTimestamp(), ts: dp.Timestamp(), sum: true,
			})
		}
	}
	return out
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

// rank describes one training process, shaped like a NeMo Lens rank.
type rank struct {
	run       string
	rank      int64
	worldSize int64
	perNode   int64
}

func (r rank) resource(rs ptrace.ResourceSpans) {
	a := rs.Resource().Attributes()
	a.PutStr("service.name", "megatron")
	a.PutStr("service.instance.id", fmt.Sprintf("%s-rank%d", r.run, r.rank))
	a.PutStr("nemo.run.id", r.run)
	a.PutInt("nv.dl.rank", r.rank)
	a.PutInt("nv.dl.world_size", r.worldSize)
	a.PutInt("nv.dl.local_rank", r.rank%r.perNode)
	a.PutStr("host.name", fmt.Sprintf("node-%d", r.rank/r.perNode))
	a.PutInt("process.pid", 4000+r.rank)
}

// stepShape is how a rank's step sits in its trace.
type stepShape int

const (
	childOfJob stepShape = iota // under a run-long megatron.pretrain span
	ownRoot                     // the step span is its own trace root
)

// stepTimes is one rank's step in a synchronous job: it computes for
// compute, waits in the gradient sync until the slowest rank is done and
// the sync took sync, then runs the optimizer.
type stepTimes struct {
	start                           time.Time
	compute, slowest, sync, optimum time.Duration
}

func (s stepTimes) duration() time.Duration { return s.slowest + s.sync + s.optimum }

// busy is what the connector must measure: compute plus optimizer.
func (s stepTimes) busy() time.Duration { return s.compute + s.optimum }

// spanWriter appends spans to a scope, with ids unique within the test.
type spanWriter struct {
	ss   ptrace.SpanSlice
	next *uint64
}

func (w spanWriter) span(trace pcommon.TraceID, parent pcommon.SpanID, name string, start, end time.Time) (ptrace.Span, pcommon.SpanID) {
	*w.next++
	var id pcommon.SpanID
	binary.BigEndian.PutUint64(id[:], *w.next)
	s := w.ss.AppendEmpty()
	s.SetTraceID(trace)
	s.SetSpanID(id)
	s.SetParentSpanID(parent)
	s.SetName(name)
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	s.SetEndTimestamp(pcommon.NewTimestampFromTime(end))
	return s, id
}

// appendStep writes one rank's step subtree in export order (children
// end first): forward_backward with microbatches, the gradient sync wait,
// the optimizer, a send (not a wait), then the step span. withStep false
// leaves the step span out, for a later batch (stepSpanOnly).
func appendStep(ss ptrace.SpanSlice, ids *uint64, stepName string, shape stepShape, iteration int64, st stepTimes, withChildren, withStep bool) {
	w := spanWriter{ss: ss, next: ids}
	var trace pcommon.TraceID
	binary.BigEndian.PutUint64(trace[:8], 0xabc)
	binary.BigEndian.PutUint64(trace[8:], uint64(iteration)) // a trace per step when its own root
	var job pcommon.SpanID
	if shape == childOfJob {
		binary.BigEndian.PutUint64(trace[8:], 1) // one trace for the run
		binary.BigEndian.PutUint64(job[:], 1)    // the job span, exported at the end of the run
	}
	*ids++
	var stepID pcommon.SpanID
	binary.BigEndian.PutUint64(stepID[:], *ids)
	s := st.start
	if withChildren {
		_, fb := w.span(trace, stepID, "megatron.forward_backward", s, s.Add(st.compute))
		half := st.compute / 2
		w.span(trace, fb, "megatron.microbatch.forward", s, s.Add(half))
		w.span(trace, fb, "megatron.microbatch.backward", s.Add(half), s.Add(st.compute))
		w.span(trace, fb, "megatron.p2p.send_forward", s.Add(half), s.Add(half))
		w.span(trace, stepID, "megatron.grad_sync.start", s.Add(st.compute), s.Add(st.slowest+st.sync))
		w.span(trace, stepID, "megatron.optimizer_step", s.Add(st.slowest+st.sync), s.Add(st.duration()))
	}
	if withStep {
		sp := ss.AppendEmpty()
		sp.SetTraceID(trace)
		sp.SetSpanID(stepID)
		sp.SetParentSpanID(job)
		sp.SetName(stepName)
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(s))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(s.Add(st.duration())))
		sp.Attributes().PutInt("megatron.iteration", iteration)
		sp.Attributes().PutDouble("megatron.loss", 2.5)
	}
}
