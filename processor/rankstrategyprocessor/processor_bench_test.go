// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/procstat"
)

const benchRanks = 1000

// perItem reports wall and process CPU time per item; run holds the b.Loop
// loop.
func perItem(b *testing.B, items int, unit string, run func()) {
	b.Helper()
	cpuStart := procstat.SelfCPU()
	run()
	n := float64(b.N) * float64(items)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/"+unit)
	if cpuEnd := procstat.SelfCPU(); cpuStart > 0 {
		b.ReportMetric(float64((cpuEnd-cpuStart).Nanoseconds())/n, "cpu-ns/"+unit)
	}
}

// processorClock adds up the CPU time spent inside the processor alone. The
// input must be copied fresh for every iteration (the processor mutates
// it); the copy, and the garbage collection it causes, stay outside: the heap
// is collected before each measured section, and the processor allocates
// nothing per resource, so no collection runs inside it.
type processorClock struct {
	total time.Duration
	ok    bool
}

func (c *processorClock) measure(process func()) {
	runtime.GC()
	start := procstat.SelfCPU()
	process()
	end := procstat.SelfCPU()
	c.total += end - start
	c.ok = start > 0
}

func (c *processorClock) report(b *testing.B, items int, unit string) {
	if c.ok {
		b.ReportMetric(float64(c.total.Nanoseconds())/float64(b.N)/float64(items), "proc-cpu-ns/"+unit)
	}
}

// benchRank is what a NeMo Lens rank of a 1,000-rank Megatron job on SLURM
// sends as its resource: 16 attributes.
func benchRank(rank int) lensfixture.Rank {
	return lensfixture.Rank{
		Run: "4831207", Rank: int64(rank), WorldSize: benchRanks, ServiceName: "megatron",
		Extra: []lensfixture.KeyValue{
			{Key: "wandb.entity", Value: "nvidia"},
			{Key: "wandb.project", Value: "gpt-175b"},
			{Key: "deployment.environment", Value: "prod"},
			{Key: "nv.dl.topology.size.tp", Value: 8},
			{Key: "nv.dl.topology.size.pp", Value: 5},
			{Key: "nv.dl.topology.size.dp", Value: 25},
			{Key: "slurm.job.id", Value: "4831207"},
			{Key: "slurm.job.name", Value: "gpt-175b-pretrain"},
		},
	}
}

// benchRun is the 1,000-rank job in the given shape.
func benchRun(shape lensfixture.Shape) lensfixture.Run {
	ranks := make([]lensfixture.Rank, benchRanks)
	for r := range ranks {
		ranks[r] = benchRank(r)
	}
	step := lensfixture.DefaultStep
	step.MicroBatches = benchMicroBatches
	return lensfixture.Run{Ranks: ranks, Shape: shape, Step: step}
}

// benchMicroBatches gives a step of lensfixture.SpansPerStep(5, false) = 20
// spans, the step README.md's measurements are for.
const benchMicroBatches = 5

// appendBenchStep appends rank's step of iteration, in the order the rank
// exports it, with the attributes Megatron-LM puts on its spans beyond the
// fixture's iteration: the step's loss and grad norm, the micro-batch ids,
// the pipeline rank, the optimizer's outcome. They weigh on what a held span
// costs.
func appendBenchStep(run lensfixture.Run, spans ptrace.SpanSlice, rank, iteration int64) {
	from := spans.Len()
	run.AppendStep(spans, run.Ranks[rank], iteration)
	var forward, backward int64 // micro-batches end, and so are exported, in order
	for i := from; i < spans.Len(); i++ {
		s := spans.At(i)
		attrs := s.Attributes()
		switch s.Name() {
		case run.Shape.StepName:
			attrs.PutDouble("megatron.loss", 2.345)
			attrs.PutDouble("megatron.grad_norm", 0.87)
			attrs.PutInt("megatron.num_microbatches", benchMicroBatches)
		case lensfixture.MicrobatchForward:
			attrs.PutInt("megatron.microbatch_id", forward)
			forward++
		case lensfixture.MicrobatchBack:
			attrs.PutInt("megatron.microbatch_id", backward)
			backward++
		case lensfixture.LayerForward:
			attrs.PutInt("dl.pipeline_parallel.rank", rank%5)
		case lensfixture.Optimizer:
			attrs.PutBool("megatron.update_successful", true)
		}
	}
}

// benchTraces is one batch holding one step from each of 1,000 ranks, each
// step its own trace, as a per_step NeMo Lens rank exports it.
func benchTraces() ptrace.Traces {
	run := benchRun(lensfixture.Shape{StepName: attrkey.MegatronTrainStep, StepsAreRoots: true})
	td := ptrace.NewTraces()
	for rank := range int64(benchRanks) {
		appendBenchStep(run, lensfixture.AppendResource(td, run.Ranks[rank]), rank, 1000)
	}
	return td
}

// perRankBatches splits a batch into one batch per resource: what the
// receiver hands over when every rank exports on its own.
func perRankBatches(td ptrace.Traces) []ptrace.Traces {
	out := make([]ptrace.Traces, td.ResourceSpans().Len())
	for i := range out {
		out[i] = ptrace.NewTraces()
		td.ResourceSpans().At(i).CopyTo(out[i].ResourceSpans().AppendEmpty())
	}
	return out
}

func spanTotal(batches []ptrace.Traces) int {
	n := 0
	for _, td := range batches {
		n += td.SpanCount()
	}
	return n
}

func newBenchTraces(b *testing.B, edit func(*Config), next consumer.Traces) processor.Traces {
	b.Helper()
	if edit == nil {
		return nopTracesProcessor(b, next)
	}
	cfg := createDefaultConfig().(*Config)
	edit(cfg)
	require.NoError(b, cfg.Validate())
	p, err := NewFactory().CreateTraces(b.Context(), nopSettings(), cfg, next)
	require.NoError(b, err)
	return p
}

// nopTracesProcessor is the pass-through baseline: the same processorhelper
// wrapper with a function that changes nothing.
func nopTracesProcessor(b *testing.B, next consumer.Traces) processor.Traces {
	p, err := processorhelper.NewTraces(b.Context(), nopSettings(), createDefaultConfig(), next,
		func(_ context.Context, td ptrace.Traces) (ptrace.Traces, error) { return td, nil },
		processorhelper.WithCapabilities(processorCapabilities))
	require.NoError(b, err)
	return p
}

var benchStrategies = []struct {
	name string
	edit func(*Config) // nil: pass-through
}{
	{"pass_through", nil},
	{"single_rank", func(*Config) {}},
	{"single_rank_keep_errors_off", func(c *Config) { c.KeepErrors = false }},
	{"sampled_10pct", func(c *Config) { c.Strategy = StrategySampled; c.SampleRate = 0.1 }},
	{"all_ranks", func(c *Config) { c.Strategy = StrategyAllRanks }},
}

// BenchmarkTraces runs 1,000 ranks' resources x a 20-span Megatron step
// through the processor, beside the pass-through baseline (the same
// processorhelper wrapper around a function that changes nothing) on the
// same input. proc-cpu-ns/span is the processor's own CPU time; ns/span and
// allocs/op also include making a fresh copy of the input each iteration,
// identical across strategies, so the allocs/op difference to pass_through
// is what the processor allocates. "one_batch" is one batch of all 1,000
// resources (behind a batch processor); "batch_per_rank" is 1,000 batches of
// one resource each (straight from the receiver, where the processor belongs).
func BenchmarkTraces(b *testing.B) {
	merged := benchTraces()
	shapes := []struct {
		name    string
		batches []ptrace.Traces
	}{
		{"one_batch", []ptrace.Traces{merged}},
		{"batch_per_rank", perRankBatches(merged)},
	}
	for _, shape := range shapes {
		spans := spanTotal(shape.batches)
		for _, st := range benchStrategies {
			b.Run(shape.name+"/"+st.name, func(b *testing.B) {
				p := newBenchTraces(b, st.edit, consumertest.NewNop())
				ctx := b.Context()
				var clock processorClock
				in := make([]ptrace.Traces, len(shape.batches))
				b.ReportAllocs()
				perItem(b, spans, "span", func() {
					for b.Loop() {
						for i, batch := range shape.batches {
							in[i] = ptrace.NewTraces()
							batch.CopyTo(in[i])
						}
						clock.measure(func() {
							for _, td := range in {
								if err := p.ConsumeTraces(ctx, td); err != nil {
									b.Fatal(err)
								}
							}
						})
					}
				})
				clock.report(b, spans, "span")
			})
		}
	}
}

// BenchmarkDecide is the per-resource decision alone (no spans touched), on
// warm Megatron resources with 16 attributes.
func BenchmarkDecide(b *testing.B) {
	td := benchTraces()
	for _, st := range benchStrategies[1:] {
		b.Run(st.name, func(b *testing.B) {
			cfg := createDefaultConfig().(*Config)
			st.edit(cfg)
			s, err := newRankSelector(cfg, zap.NewNop())
			require.NoError(b, err)
			rss := td.ResourceSpans()
			b.ReportAllocs()
			perItem(b, rss.Len(), "resource", func() {
				for b.Loop() {
					for i := 0; i < rss.Len(); i++ {
						s.decide(rss.At(i).Resource().Attributes())
					}
				}
			})
		})
	}
}

// BenchmarkTracesPipeline measures what a whole pass-through pipeline spends
// on the same input: OTLP protobuf decode (receiver), the pass-through
// processor, and protobuf encode (exporter), per rank batch. It is the
// denominator for "< 10% of a pass-through pipeline's CPU", and, with
// rank_strategy in place, shows what the pipeline costs once it filters.
func BenchmarkTracesPipeline(b *testing.B) {
	var m ptrace.ProtoMarshaler
	var requests [][]byte
	var spans int
	for _, td := range perRankBatches(benchTraces()) {
		raw, err := m.MarshalTraces(td)
		require.NoError(b, err)
		requests = append(requests, raw)
		spans += td.SpanCount()
	}
	for _, st := range []struct {
		name string
		edit func(*Config)
	}{benchStrategies[0], benchStrategies[1], benchStrategies[3]} {
		b.Run(st.name, func(b *testing.B) {
			exporter := consumerFunc(func(_ context.Context, td ptrace.Traces) error {
				_, err := m.MarshalTraces(td)
				return err
			})
			p := newBenchTraces(b, st.edit, exporter)
			var u ptrace.ProtoUnmarshaler
			ctx := b.Context()
			b.ReportAllocs()
			perItem(b, spans, "span", func() {
				for b.Loop() {
					for _, raw := range requests {
						td, err := u.UnmarshalTraces(raw)
						if err != nil {
							b.Fatal(err)
						}
						if err := p.ConsumeTraces(ctx, td); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		})
	}
}

type consumerFunc func(context.Context, ptrace.Traces) error

func (f consumerFunc) ConsumeTraces(ctx context.Context, td ptrace.Traces) error { return f(ctx, td) }

func (consumerFunc) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

// BenchmarkMetricsAndLogs covers the other two signals, single_rank against
// pass-through over 1,000 ranks: a step's training metrics per rank
// (lensfixture.MetricsPerStep points), and 5 log records per rank, measured
// as in BenchmarkTraces.
func BenchmarkMetricsAndLogs(b *testing.B) {
	run := benchRun(lensfixture.Shape{})
	md := pmetric.NewMetrics()
	ld := plog.NewLogs()
	for _, rank := range run.Ranks {
		rm := md.ResourceMetrics().AppendEmpty()
		rank.PutResource(rm.Resource().Attributes())
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName(lensfixture.ScopeName)
		run.AppendMetrics(sm.Metrics(), rank, 1000)
		rl := ld.ResourceLogs().AppendEmpty()
		rank.PutResource(rl.Resource().Attributes())
		lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
		for i := range int64(5) {
			run.AppendLog(lrs, rank, 1000+i, plog.SeverityNumberInfo, fmt.Sprintf("iteration %d done", 1000+i))
		}
	}
	cfg := createDefaultConfig().(*Config)
	ctx := b.Context()

	for _, pass := range []bool{true, false} {
		name := "single_rank"
		if pass {
			name = "pass_through"
		}
		b.Run("metrics/"+name, func(b *testing.B) {
			var p processor.Metrics
			var err error
			if pass {
				p, err = processorhelper.NewMetrics(ctx, nopSettings(), cfg, consumertest.NewNop(),
					func(_ context.Context, md pmetric.Metrics) (pmetric.Metrics, error) { return md, nil })
			} else {
				p, err = NewFactory().CreateMetrics(ctx, nopSettings(), cfg, consumertest.NewNop())
			}
			require.NoError(b, err)
			var clock processorClock
			b.ReportAllocs()
			perItem(b, md.DataPointCount(), "point", func() {
				for b.Loop() {
					in := pmetric.NewMetrics()
					md.CopyTo(in)
					clock.measure(func() { require.NoError(b, p.ConsumeMetrics(ctx, in)) })
				}
			})
			clock.report(b, md.DataPointCount(), "point")
		})
		b.Run("logs/"+name, func(b *testing.B) {
			var p processor.Logs
			var err error
			if pass {
				p, err = processorhelper.NewLogs(ctx, nopSettings(), cfg, consumertest.NewNop(),
					func(_ context.Context, ld plog.Logs) (plog.Logs, error) { return ld, nil })
			} else {
				p, err = NewFactory().CreateLogs(ctx, nopSettings(), cfg, consumertest.NewNop())
			}
			require.NoError(b, err)
			var clock processorClock
			b.ReportAllocs()
			perItem(b, ld.LogRecordCount(), "record", func() {
				for b.Loop() {
					in := plog.NewLogs()
					ld.CopyTo(in)
					clock.measure(func() { require.NoError(b, p.ConsumeLogs(ctx, in)) })
				}
			})
			clock.report(b, ld.LogRecordCount(), "record")
		})
	}
}
