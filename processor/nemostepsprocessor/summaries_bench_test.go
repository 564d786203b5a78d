// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsprocessor

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/stepsummary"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/clocktest"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
)

// summaryBatch is one iteration of a job of ranks ranks as a gateway gets
// it from the agents: per rank its resource and one step summary
// (internal/stepsummary), of the step benchBatch's ranks send.
func summaryBatch(ranks int64) ptrace.Traces {
	run := lensfixture.Run{
		Ranks:  lensfixture.Fleet(lensfixture.Rank{Run: "bench", WorldSize: ranks}),
		Shape:  ownRoot,
		Period: benchStepPeriod,
		Step:   lensfixture.Step{Compute: 400 * time.Millisecond, GradSync: 60 * time.Millisecond, Optimizer: 40 * time.Millisecond, MicroBatches: 4},
	}
	out := ptrace.NewTraces()
	for _, rank := range run.Ranks {
		src := ptrace.NewSpanSlice()
		at := run.AppendStep(src, rank, 0)
		rs := out.ResourceSpans().AppendEmpty()
		rank.PutResource(rs.Resource().Attributes())
		stepsummary.WriteStep(stepsummary.NewScope(rs).AppendEmpty(), src.At(at), 0, int64(60*time.Millisecond), 4)
	}
	return out
}

// nextSummaries moves the summaries one step later.
func nextSummaries(td ptrace.Traces, iteration int64) {
	shift := pcommon.Timestamp(benchStepPeriod)
	for _, rs := range td.ResourceSpans().All() {
		s := rs.ScopeSpans().At(0).Spans().At(0)
		s.SetStartTimestamp(s.StartTimestamp() + shift)
		s.SetEndTimestamp(s.EndTimestamp() + shift)
		s.Attributes().PutInt(stepsummary.AttrIteration, iteration)
	}
}

// BenchmarkGatewaySummaries is one run on a gateway fed by agents that
// summarize (two tiers as committed), at one step per rank per iteration:
// the gateway's nemo_steps (step metrics, stalls, goodput) reads each
// rank's step summary and decides the step at the next tick. It reports
// the CPU per rank-step (ns/rank-step: reading the summaries, deciding
// and building the step points), the state it keeps per rank (B/rank: live
// heap after GC, less the batch) and the decision's own time at a tick
// (decide_ms; a complete step is decided at the next tick, a tenth of
// decision_wait after its last rank reported). Compare ns/rank-step with
// BenchmarkConsumeTraces/with_decide's ns/span times the spans per step
// (benchBatch: lensfixture.SpansPerStep(4, false)), the same job's cost when
// the gateway gets every span.
func BenchmarkGatewaySummaries(b *testing.B) {
	for _, ranks := range []int64{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("ranks_%d", ranks), func(b *testing.B) {
			tel := componenttest.NewTelemetry()
			defer func() { _ = tel.Shutdown(b.Context()) }()
			clk := clocktest.NewFake()
			cfg := createDefaultConfig().(*Config)
			td := summaryBatch(ranks)
			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			c := startBenchProcessor(b, tel, cfg, clk)
			ctx := b.Context()
			var decide time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				nextSummaries(td, int64(i+1))
				b.StartTimer()
				if err := c.ConsumeTraces(ctx, td); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				clk.Advance(time.Second) // a tick: the complete step is decided
				decide += time.Since(start)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*ranks), "ns/rank-step")
			b.ReportMetric(float64(decide.Milliseconds())/float64(b.N), "decide_ms")
			runtime.GC()
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(ranks), "B/rank")
			runtime.KeepAlive(td)
			_ = c.Shutdown(ctx)
		})
	}
}
