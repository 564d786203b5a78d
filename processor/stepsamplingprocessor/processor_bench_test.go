package stepsamplingprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor/internal/metadata"
)

const (
	benchRanks        = 1000
	benchMicrobatches = 8 // forward and backward each: 16 spans, plus 3 more children and the step span
)

// appendBenchChildren appends a per_step step's children: forward_backward
// with a forward and a backward per microbatch, the gradient sync and the
// optimizer step.
func appendBenchChildren(dst ptrace.SpanSlice, r rankProc, it int64) {
	start := stepStart(it)
	tid := traceID(shapes[0], r.rank, it)
	step := spanID(kindStep, r.rank, it, 0)
	fb := spanID(kindStep, r.rank, it, 1)
	idx := byte(2)
	for m := range benchMicrobatches {
		at := start.Add(time.Duration(20+70*m) * time.Millisecond)
		for _, name := range []string{"megatron.microbatch.forward", "megatron.microbatch.backward"} {
			s := dst.AppendEmpty()
			setSpan(s, name, tid, spanID(kindStep, r.rank, it, idx), fb, at, at.Add(30*time.Millisecond))
			s.Attributes().PutInt("megatron.microbatch_id", int64(m))
			idx++
			at = at.Add(35 * time.Millisecond)
		}
	}
	setSpan(dst.AppendEmpty(), "megatron.forward_backward", tid, fb, step, start.Add(10*time.Millisecond), start.Add(600*time.Millisecond))
	setSpan(dst.AppendEmpty(), "megatron.grad_sync.finish", tid, spanID(kindStep, r.rank, it, idx), step, start.Add(600*time.Millisecond), start.Add(800*time.Millisecond))
	setSpan(dst.AppendEmpty(), "megatron.optimizer_step", tid, spanID(kindStep, r.rank, it, idx+1), step, start.Add(800*time.Millisecond), start.Add(890*time.Millisecond))
}

// benchBatch is one export of every rank. whole: each rank's step it, its
// children then its step span. Otherwise split as an SDK's exports fall:
// step it's span and the children of step it+1, whose span comes next time.
func benchBatch(ranks []rankProc, it int64, whole bool) ptrace.Traces {
	td := ptrace.NewTraces()
	for _, r := range ranks {
		spans := resourceFor(td, r)
		if whole {
			appendBenchChildren(spans, r, it)
			appendStepSpan(spans, shapes[0], r, it)
			continue
		}
		appendStepSpan(spans, shapes[0], r, it)
		appendBenchChildren(spans, r, it+1)
	}
	return td
}

func BenchmarkConsumeTraces(b *testing.B) {
	ranks := ranksOf("bench-run", benchRanks)
	for _, bc := range []struct {
		name  string
		rate  float64
		whole bool
	}{
		{"sample_rate=1", 1, true},
		{"sample_rate=0.01/step_with_children", 0.01, true},
		{"sample_rate=0.01/children_before_step", 0.01, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := sampledConfig(bc.rate)
			tp, err := NewFactory().CreateTraces(b.Context(), processortest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
			require.NoError(b, err)
			require.NoError(b, tp.Start(b.Context(), componenttest.NewNopHost()))
			defer func() { require.NoError(b, tp.Shutdown(b.Context())) }()
			if !bc.whole {
				// The first step's children, so that every measured batch
				// both decides held spans and holds new ones.
				first := ptrace.NewTraces()
				for _, r := range ranks {
					appendBenchChildren(resourceFor(first, r), r, 0)
				}
				require.NoError(b, tp.ConsumeTraces(b.Context(), first))
			}
			spans := 0
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				td := benchBatch(ranks, int64(i), bc.whole)
				spans += td.SpanCount()
				b.StartTimer()
				if err := tp.ConsumeTraces(b.Context(), td); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(spans), "ns/span")
			b.ReportMetric(float64(spans)/float64(b.N), "spans/batch")
		})
	}
}

// TestBenchBatchIsDecided checks the benchmark measures what it says: the
// split batches hold the next step's children and decide the previous.
func TestBenchBatchIsDecided(t *testing.T) {
	ranks := ranksOf("bench-run", 4)
	h := newHarness(t, sampledConfig(0.01))
	first := ptrace.NewTraces()
	for _, r := range ranks {
		appendBenchChildren(resourceFor(first, r), r, 0)
	}
	h.send(t, first)
	perStep := benchMicrobatches*2 + 3
	require.Equal(t, 4*perStep, h.heldSpans())
	for it := range int64(20) {
		h.send(t, benchBatch(ranks, it, false))
		require.Equal(t, 4*perStep, h.heldSpans(), "iteration %d", it)
	}
}
