// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsprocessor

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/clocktest"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
	"github.com/nemo-lens/otelcol-nemo/processor/nemostepsprocessor/internal/metadatatest"
)

const (
	benchRanks      = 1000
	benchStepPeriod = time.Second
)

// benchBatch is one iteration of a 1000-rank job, one resource per rank:
// per rank a step span and its children, lensfixture.SpansPerStep(4, false)
// in all, 2 of them wait spans (the gradient sync start and finish), shaped
// like Megatron-LM's per_step spans with 4 microbatches.
func benchBatch() ptrace.Traces {
	run := lensfixture.Run{
		Ranks:  lensfixture.Fleet(lensfixture.Rank{Run: "bench", WorldSize: benchRanks}),
		Shape:  ownRoot,
		Period: benchStepPeriod,
		Step:   lensfixture.Step{Compute: 400 * time.Millisecond, GradSync: 60 * time.Millisecond, Optimizer: 40 * time.Millisecond, MicroBatches: 4},
	}
	return run.Iteration(0)
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
			if _, ok := s.Attributes().Get(attrkey.MegatronIteration); ok { // the step span
				s.Attributes().PutInt(attrkey.MegatronIteration, iteration)
			}
		}
	}
}

// startBenchProcessor starts a processor of cfg on clk whose points go
// nowhere.
func startBenchProcessor(b *testing.B, tel *componenttest.Telemetry, cfg *Config, clk *clocktest.Fake) *stepsProcessor {
	b.Helper()
	c, err := newProcessor(metadatatest.NewSettings(tel), cfg, clk)
	if err != nil {
		b.Fatal(err)
	}
	c.next = consumertest.NewNop()
	if err := c.Start(b.Context(), componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkConsumeTraces reports the cost per span of a realistic batch:
// record only ConsumeTraces (the caller's latency), with_decide adds the
// tick that decides the step and builds its 5,001 data points;
// record_stalls_off is record without the stall detector (stalls:
// {enabled: false}), what the detector costs on the record path, and
// record_goodput_off without goodput (goodput: {enabled: false}).
func BenchmarkConsumeTraces(b *testing.B) {
	for _, bc := range []struct {
		name                              string
		withDecide, stallsOff, goodputOff bool
	}{
		{name: "record"},
		{name: "with_decide", withDecide: true},
		{name: "record_stalls_off", stallsOff: true},
		{name: "record_goodput_off", goodputOff: true},
	} {
		withDecide := bc.withDecide
		b.Run(bc.name, func(b *testing.B) {
			tel := componenttest.NewTelemetry()
			defer func() { _ = tel.Shutdown(b.Context()) }()
			clk := clocktest.NewFake()
			cfg := createDefaultConfig().(*Config)
			if bc.stallsOff {
				cfg.Stalls = configoptional.None[StallsConfig]()
			}
			if bc.goodputOff {
				cfg.Goodput = configoptional.None[GoodputConfig]()
			}
			c := startBenchProcessor(b, tel, cfg, clk)
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
				clk.Advance(time.Second) // a tick: the complete step is decided
				if !withDecide {
					b.StartTimer()
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*spans), "ns/span")
			_ = c.Shutdown(ctx)
		})
	}
}
