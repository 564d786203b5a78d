// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepsamplingprocessor

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
	"github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor/internal/metadata"
)

const (
	benchRanks        = 1000
	benchMicrobatches = 5 // 20 spans a step
)

// benchJob is a per_step job of benchRanks ranks: each step a
// forward_backward with a forward (and its layer) and a backward per
// microbatch, the gradient sync and the optimizer step.
func benchJob() lensfixture.Run {
	step := lensfixture.DefaultStep
	step.MicroBatches = benchMicrobatches
	return lensfixture.Run{Ranks: ranksOf("bench-run", benchRanks), Shape: inJob, Step: step}
}

// benchBatch is one export of every rank. whole: each rank's step it, its
// children then its step span. Otherwise split as an SDK's exports fall:
// step it's span and the children of step it+1, whose span comes next time.
func benchBatch(run lensfixture.Run, it int64, whole bool) ptrace.Traces {
	td := ptrace.NewTraces()
	for _, r := range run.Ranks {
		spans := lensfixture.AppendResource(td, r)
		if whole {
			appendStep(spans, run, r, it)
			continue
		}
		appendStepSpan(spans, run, r, it)
		appendStepChildren(spans, run, r, it+1)
	}
	return td
}

func BenchmarkConsumeTraces(b *testing.B) {
	run := benchJob()
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
				for _, r := range run.Ranks {
					appendStepChildren(lensfixture.AppendResource(first, r), run, r, 0)
				}
				require.NoError(b, tp.ConsumeTraces(b.Context(), first))
			}
			// Keeping every step, the processor passes batches through
			// untouched: one batch serves every iteration, so that b.N
			// (large, at about a nanosecond a span) does not build as many.
			var same ptrace.Traces
			if bc.rate == 1 {
				same = benchBatch(run, 0, bc.whole)
			}
			spans := 0
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				td := same
				if bc.rate != 1 {
					td = benchBatch(run, int64(i), bc.whole)
				}
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
	run := benchJob()
	run.Ranks = ranksOf("bench-run", 4)
	h := newHarness(t, sampledConfig(0.01))
	first := ptrace.NewTraces()
	for _, r := range run.Ranks {
		appendStepChildren(lensfixture.AppendResource(first, r), run, r, 0)
	}
	h.send(t, first)
	perStep := lensfixture.SpansPerStep(benchMicrobatches, false) - 1 // a step's children
	require.Equal(t, 4*perStep, h.heldSpans())
	for it := range int64(20) {
		h.send(t, benchBatch(run, it, false))
		require.Equal(t, 4*perStep, h.heldSpans(), "iteration %d", it)
	}
}
