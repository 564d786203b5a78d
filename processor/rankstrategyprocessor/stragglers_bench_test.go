// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/clocktest"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/procstat"
	"github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor/internal/metadatatest"
)

// benchStragglerRun is the 1,000-rank run of the straggler benchmarks, its
// steps under the run-long job span: every rank computes a second plus a
// microsecond per rank, rank 17 twice as long on every tenth step, then
// waits in the gradient sync for the slowest rank and 100ms more, and runs
// the optimizer for 150ms.
var benchStragglerRun = func() lensfixture.Run {
	run := benchRun(lensfixture.Shape{StepName: attrkey.MegatronTrainStep})
	run.Period = 3 * time.Second // beyond the slow steps' 2.25s
	run.Step.GradSync, run.Step.Optimizer = 100*time.Millisecond, 150*time.Millisecond
	run.Compute = func(rank, iteration int64) time.Duration {
		c := time.Second + time.Duration(rank)*time.Microsecond
		if rank == 17 && iteration%10 == 0 {
			c *= 2
		}
		return c
	}
	return run.Memoized()
}()

// benchSpansPerStep is the spans of one rank's step.
var benchSpansPerStep = lensfixture.SpansPerStep(benchMicroBatches, false)

// benchStepBatches is one synchronous step of a 1,000-rank run as the
// receiver hands it over: one batch per rank, its spans in the order the
// rank exports them (children first, the step span last).
func benchStepBatches(iteration int) []ptrace.Traces {
	out := make([]ptrace.Traces, benchRanks)
	for rank := range int64(benchRanks) {
		td := ptrace.NewTraces()
		appendBenchStep(benchStragglerRun, lensfixture.AppendResource(td, benchStragglerRun.Ranks[rank]), rank, int64(iteration))
		out[rank] = td
	}
	return out
}

// benchStragglers feeds steps of a 1,000-rank run, one per simulated
// second, to a processor on a fake clock.
type benchStragglers struct {
	tp        processor.Traces
	tel       *componenttest.Telemetry
	clock     *clocktest.Fake
	iteration int
}

func newBenchStragglers(b *testing.B, stragglers bool, edit func(*StragglersConfig)) *benchStragglers {
	b.Helper()
	cfg := createDefaultConfig().(*Config)
	if stragglers {
		sc := cfg.Stragglers.GetOrInsertDefault()
		if edit != nil {
			edit(sc)
		}
	}
	require.NoError(b, cfg.Validate())
	clk := clocktest.NewFake()
	tel := componenttest.NewTelemetry()
	tp, _, err := newTracesProcessor(b.Context(), metadatatest.NewSettings(tel), cfg, consumertest.NewNop(), clk)
	require.NoError(b, err)
	require.NoError(b, tp.Start(b.Context(), componenttest.NewNopHost()))
	b.Cleanup(func() {
		require.NoError(b, tp.Shutdown(context.Background()))  //nolint:usetesting // b.Context() is canceled before Cleanup runs
		require.NoError(b, tel.Shutdown(context.Background())) //nolint:usetesting // as above
	})
	return &benchStragglers{tp: tp, tel: tel, clock: clk}
}

func (s *benchStragglers) consume(b *testing.B, batches []ptrace.Traces) {
	for _, td := range batches {
		if err := s.tp.ConsumeTraces(b.Context(), td); err != nil {
			b.Fatal(err)
		}
	}
}

// step feeds the next step and lets one second pass (one tick).
func (s *benchStragglers) step(b *testing.B) {
	s.iteration++
	s.consume(b, benchStepBatches(s.iteration))
	s.clock.Advance(time.Second)
}

// held is the spans straggler retention holds, as its spans_held metric
// says.
func (s *benchStragglers) held() int {
	m, err := s.tel.GetMetric("otelcol_processor_rank_strategy_stragglers_spans_held")
	if err != nil {
		return 0
	}
	n := int64(0)
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		n += dp.Value
	}
	return int(n)
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// measureBytesPerHeldSpan fills a buffer that decides nothing with ten
// steps of 1,000 ranks and divides the heap growth by the spans held:
// everything the buffer keeps per span (the span as received, its share of
// its resource and scope, the references, the span-to-step map, the steps'
// durations).
func measureBytesPerHeldSpan(b *testing.B) float64 {
	s := newBenchStragglers(b, true, func(c *StragglersConfig) { c.DecisionWait = time.Hour })
	before := heapInUse()
	for i := range 10 {
		s.consume(b, benchStepBatches(i+1))
	}
	after := heapInUse()
	held := s.held()
	require.Equal(b, 10*(benchRanks-1)*benchSpansPerStep, held)
	return float64(after-before) / float64(held)
}

// BenchmarkStragglers runs a 1,000-rank Megatron run through single_rank with
// stragglers off and on, and on with summarize (an agent's), side by side: one b.N iteration is one step (1,000
// batches of one rank's 20 spans, sent as ranks export them, children first)
// plus one second of simulated time, so with the default decision_wait of
// 10s about ten steps are held at any time. The buffer is filled to that
// steady state before timing. The garbage collector runs as it would (no
// forced collections), with the buffer's live spans to mark.
//
// proc-cpu-ns/span is the process CPU time spent while the processor
// consumes the step and its ticker decides (garbage collection that happens
// meanwhile included); spans/s/core is its inverse. total-cpu-ns/span is
// the CPU of the whole loop, building the input included: the difference
// between on and off is everything stragglers cost, wherever the collector
// ran. peak-held-spans is the most spans held at once (right before a tick),
// peak-held-MiB that times B/held-span, which is measured once per run by
// filling a buffer with ten steps and reading the heap.
func BenchmarkStragglers(b *testing.B) {
	bytesPerSpan := measureBytesPerHeldSpan(b)
	spansPerStep := benchRanks * benchSpansPerStep
	for _, mode := range []struct {
		name       string
		stragglers bool
		edit       func(*StragglersConfig)
	}{
		{"stragglers_off", false, nil},
		{"stragglers_on", true, nil},
		// An agent's (configs/agent.yaml): summaries of the dropped ranks.
		{"summarize", true, func(sc *StragglersConfig) { sc.Summarize = true }},
	} {
		b.Run(mode.name, func(b *testing.B) {
			s := newBenchStragglers(b, mode.stragglers, mode.edit)
			for range 12 {
				s.step(b)
			}
			runtime.GC()
			var proc time.Duration
			peak := 0
			loopStart := procstat.SelfCPU()
			cpuOK := loopStart > 0
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				s.iteration++
				in := benchStepBatches(s.iteration)
				b.StartTimer()
				start := procstat.SelfCPU()
				s.consume(b, in)
				mid := procstat.SelfCPU()
				b.StopTimer()
				peak = max(peak, s.held())
				b.StartTimer()
				tickStart := procstat.SelfCPU()
				s.clock.Advance(time.Second)
				end := procstat.SelfCPU()
				proc += (mid - start) + (end - tickStart)
			}
			loopEnd := procstat.SelfCPU()
			n := float64(b.N) * float64(spansPerStep)
			if cpuOK {
				perSpan := float64(proc.Nanoseconds()) / n
				b.ReportMetric(perSpan, "proc-cpu-ns/span")
				b.ReportMetric(1e9/perSpan, "spans/s/core")
				b.ReportMetric(float64((loopEnd-loopStart).Nanoseconds())/n, "total-cpu-ns/span")
			}
			b.ReportMetric(float64(peak), "peak-held-spans")
			if mode.stragglers {
				b.ReportMetric(bytesPerSpan, "B/held-span")
				b.ReportMetric(float64(peak)*bytesPerSpan/(1<<20), "peak-held-MiB")
			}
		})
	}
}
