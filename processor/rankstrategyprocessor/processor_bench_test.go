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
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/internal/procstat"
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

// megatronResource sets what a NeMo Lens rank of a 1,000-rank Megatron job on
// SLURM sends as its resource.
func megatronResource(attrs pcommon.Map, rank int) {
	attrs.PutStr("service.name", "megatron")
	attrs.PutStr("service.instance.id", fmt.Sprintf("4831207-rank%d", rank))
	attrs.PutStr("nemo.run.id", "4831207")
	attrs.PutStr("wandb.entity", "nvidia")
	attrs.PutStr("wandb.project", "gpt-175b")
	attrs.PutStr("deployment.environment", "prod")
	attrs.PutInt("nv.dl.rank", int64(rank))
	attrs.PutInt("nv.dl.world_size", benchRanks)
	attrs.PutInt("nv.dl.local_rank", int64(rank%8))
	attrs.PutInt("nv.dl.topology.size.tp", 8)
	attrs.PutInt("nv.dl.topology.size.pp", 5)
	attrs.PutInt("nv.dl.topology.size.dp", 25)
	attrs.PutStr("slurm.job.id", "4831207")
	attrs.PutStr("slurm.job.name", "gpt-175b-pretrain")
	attrs.PutStr("host.name", fmt.Sprintf("node%04d", rank/8))
	attrs.PutInt("process.pid", int64(20000+rank))
}

// megatronStep appends one training step's spans (a megatron.train_step
// subtree, 20 spans) as a per_step NeMo Lens rank exports them.
func megatronStep(spans ptrace.SpanSlice, rank, iteration int) {
	traceID := pcommon.TraceID{0x4c, byte(iteration), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}
	spanID := func(n int) pcommon.SpanID {
		return pcommon.SpanID{byte(rank >> 8), byte(rank), byte(iteration >> 8), byte(iteration), 0, 0, 0, byte(n + 1)}
	}
	start := pcommon.Timestamp(1_750_000_000_000_000_000 + uint64(iteration)*1_000_000_000)
	n := 0
	add := func(name string, parent int) ptrace.Span {
		s := spans.AppendEmpty()
		s.SetName(name)
		s.SetTraceID(traceID)
		s.SetSpanID(spanID(n))
		if parent >= 0 {
			s.SetParentSpanID(spanID(parent))
		}
		s.SetStartTimestamp(start + pcommon.Timestamp(n*1_000_000))
		s.SetEndTimestamp(start + pcommon.Timestamp(n*1_000_000+900_000))
		s.Attributes().PutInt("megatron.iteration", int64(iteration))
		n++
		return s
	}
	step := add("megatron.train_step", -1)
	step.Attributes().PutDouble("megatron.loss", 2.345)
	step.Attributes().PutDouble("megatron.grad_norm", 0.87)
	step.Attributes().PutInt("megatron.num_microbatches", 4)
	add("megatron.forward_backward", 0)
	for mb := range 4 {
		fwd := add("megatron.microbatch.forward", 1)
		fwd.Attributes().PutInt("megatron.microbatch_id", int64(mb))
		p := n - 1
		add("megatron.layer.self_attention", p).Attributes().PutInt("dl.pipeline_parallel.rank", int64(rank%5))
		add("megatron.p2p.send_forward", p)
		add("megatron.microbatch.backward", 1).Attributes().PutInt("megatron.microbatch_id", int64(mb))
	}
	add("megatron.grad_sync.finish", 0)
	add("megatron.optimizer_step", 0).Attributes().PutBool("megatron.update_successful", true)
}

// benchTraces is one batch holding one step from each of 1,000 ranks.
func benchTraces() ptrace.Traces {
	td := ptrace.NewTraces()
	for rank := range benchRanks {
		rs := td.ResourceSpans().AppendEmpty()
		megatronResource(rs.Resource().Attributes(), rank)
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("megatron.core")
		megatronStep(ss.Spans(), rank, 1000)
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
// pass-through over 1,000 ranks: 8 Megatron gauges per rank, and 5 log
// records per rank, measured as in BenchmarkTraces.
func BenchmarkMetricsAndLogs(b *testing.B) {
	md := pmetric.NewMetrics()
	ld := plog.NewLogs()
	for rank := range benchRanks {
		rm := md.ResourceMetrics().AppendEmpty()
		megatronResource(rm.Resource().Attributes(), rank)
		ms := rm.ScopeMetrics().AppendEmpty().Metrics()
		for _, name := range []string{"loss", "throughput_tflops", "tokens_per_sec", "grad_norm", "learning_rate", "memory_allocated_gb", "skipped_iters", "step_duration_ms"} {
			m := ms.AppendEmpty()
			m.SetName("megatron.training." + name)
			m.SetEmptyGauge().DataPoints().AppendEmpty().SetDoubleValue(1.5)
		}
		rl := ld.ResourceLogs().AppendEmpty()
		megatronResource(rl.Resource().Attributes(), rank)
		lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
		for i := range 5 {
			lr := lrs.AppendEmpty()
			lr.SetSeverityNumber(plog.SeverityNumberInfo)
			lr.Body().SetStr(fmt.Sprintf("iteration %d done", i))
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
