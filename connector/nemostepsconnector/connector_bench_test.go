package nemostepsconnector

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector/internal/metadatatest"
	"github.com/nemo-lens/otelcol-nemo/internal/clock/clocktest"
)

const (
	benchRanks      = 1000
	benchStepPeriod = time.Second
)

// benchBatch is one iteration of a 1000-rank job, one resource per rank:
// per rank 1 step span and 30 children, 2 of them wait spans (the
// gradient sync start and finish), shaped like Megatron-LM's per_step
// spans with 4 microbatches.
func benchBatch() ptrace.Traces {
	td := ptrace.NewTraces()
	var ids uint64
	for r := range int64(benchRanks) {
		rs := td.ResourceSpans().AppendEmpty()
		rank{run: "bench", rank: r, worldSize: benchRanks, perNode: 8}.resource(rs)
		w := spanWriter{ss: rs.ScopeSpans().AppendEmpty().Spans(), next: &ids}
		var trace pcommon.TraceID
		trace[0] = 1
		s := t0
		at := func(ms int) time.Time { return s.Add(time.Duration(ms) * time.Millisecond) }
		_, fb := w.span(trace, pcommon.SpanID{}, "megatron.forward_backward", at(0), at(400))
		for mb := range 4 {
			base := mb * 100
			fwd, fid := w.span(trace, fb, "megatron.microbatch.forward", at(base), at(base+40))
			fwd.Attributes().PutInt("megatron.microbatch_id", int64(mb))
			w.span(trace, fid, "megatron.layer.self_attention", at(base), at(base+20))
			w.span(trace, fid, "megatron.layer.mlp", at(base+20), at(base+40))
			bwd, bid := w.span(trace, fb, "megatron.microbatch.backward", at(base+40), at(base+100))
			bwd.Attributes().PutInt("megatron.microbatch_id", int64(mb))
			w.span(trace, bid, "megatron.layer.self_attention", at(base+40), at(base+60))
			w.span(trace, bid, "megatron.layer.mlp", at(base+60), at(base+100))
		}
		w.span(trace, fb, "megatron.p2p.send_forward", at(390), at(395))
		w.span(trace, pcommon.SpanID{}, "megatron.get_batch", at(0), at(2))
		w.span(trace, pcommon.SpanID{}, "megatron.grad_sync.start", at(400), at(440))
		w.span(trace, pcommon.SpanID{}, "megatron.grad_sync.finish", at(440), at(460))
		w.span(trace, pcommon.SpanID{}, "megatron.optimizer_step", at(460), at(500))
		step, _ := w.span(trace, pcommon.SpanID{}, "megatron.train_step", at(0), at(500))
		step.Attributes().PutInt("megatron.iteration", 0)
		step.Attributes().PutDouble("megatron.loss", 2.5)
	}
	return td
}

// nextIteration moves the batch one step later, as the ranks' next step.
func nextIteration(td ptrace.Traces, iteration int64) {
	shift := pcommon.Timestamp(benchStepPeriod)
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		spans := rss.At(i).ScopeSpans().At(0).Spans()
		for j := 0; j < spans.Len(); j++ {
			s := spans.At(j)
			s.SetStartTimestamp(s.StartTimestamp() + shift)
			s.SetEndTimestamp(s.EndTimestamp() + shift)
			if s.Name() == "megatron.train_step" {
				s.Attributes().PutInt("megatron.iteration", iteration)
			}
		}
	}
}

// BenchmarkConsumeTraces reports the cost per span of a realistic batch:
// record only ConsumeTraces (the caller's latency), with_decide adds the
// tick that decides the step and builds its 5,001 data points.
func BenchmarkConsumeTraces(b *testing.B) {
	for _, withDecide := range []bool{false, true} {
		name := "record"
		if withDecide {
			name = "with_decide"
		}
		b.Run(name, func(b *testing.B) {
			tel := componenttest.NewTelemetry()
			defer func() { _ = tel.Shutdown(b.Context()) }()
			clk := clocktest.NewFake()
			c, err := newConnector(metadatatest.NewSettings(tel), createDefaultConfig().(*Config), consumertest.NewNop(), clk)
			if err != nil {
				b.Fatal(err)
			}
			ctx := b.Context()
			td := benchBatch()
			spans := td.SpanCount()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				nextIteration(td, int64(i+1))
				b.StartTimer()
				if err := c.ConsumeTraces(ctx, td); err != nil {
					b.Fatal(err)
				}
				if !withDecide {
					b.StopTimer()
				}
				c.tick(ctx) // the connector is not started: tick directly
				if !withDecide {
					b.StartTimer()
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*spans), "ns/span")
			_ = c.Shutdown(ctx)
		})
	}
}
