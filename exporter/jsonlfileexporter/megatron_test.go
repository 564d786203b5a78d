package jsonlfileexporter

import (
	"encoding/binary"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Batches shaped like what a Megatron-LM job sends through NeMo Lens: one
// resource per rank with the resource attributes a rank sets, spans of the
// train step tree with ~20 attributes each, the training metrics and logs.

var megatronSpanNames = []string{
	"megatron.train_step",
	"megatron.forward_backward",
	"megatron.microbatch.forward",
	"megatron.microbatch.backward",
	"megatron.layer.forward",
	"megatron.layer.self_attention",
	"megatron.layer.mlp",
	"megatron.p2p.recv_forward",
	"megatron.p2p.send_forward",
	"megatron.grad_sync.start",
	"megatron.grad_sync.finish",
	"megatron.optimizer_step",
}

var megatronStart = pcommon.NewTimestampFromTime(time.Date(2025, 6, 1, 12, 0, 0, 123456789, time.UTC))

func putRankResource(r pcommon.Resource, runID string, rank, worldSize int) {
	a := r.Attributes()
	a.PutStr("service.name", "megatron")
	a.PutStr("service.instance.id", fmt.Sprintf("%s-rank%d", runID, rank))
	a.PutStr("nemo.run.id", runID)
	a.PutStr("wandb.entity", "nvidia-research")
	a.PutStr("wandb.project", "gpt3-8b-pretrain")
	a.PutStr("deployment.environment", "prod")
	a.PutInt("nv.dl.rank", int64(rank))
	a.PutInt("nv.dl.world_size", int64(worldSize))
	a.PutInt("nv.dl.local_rank", int64(rank%8))
	a.PutInt("dl.tensor_parallel.size", 2)
	a.PutInt("dl.pipeline_parallel.size", 2)
	a.PutInt("dl.data_parallel.size", int64(worldSize/4))
	a.PutStr("slurm.job.id", "4242424")
	a.PutStr("slurm.job.name", "gpt3-8b")
	a.PutStr("slurm.nodelist", "node[001-008]")
	a.PutStr("host.name", fmt.Sprintf("node%03d", rank/8+1))
	a.PutInt("process.pid", int64(10000+rank))
	a.PutInt("host.gpu.count", 8)
}

func idFor(seed uint64, n int) []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b, seed*0x9e3779b97f4a7c15+1)
	binary.BigEndian.PutUint64(b[8:], uint64(n)*0xbf58476d1ce4e5b9+seed)
	return b
}

// megatronTraces returns ranks resources with spansPerRank spans each.
func megatronTraces(ranks, spansPerRank int) ptrace.Traces {
	td := ptrace.NewTraces()
	for rank := range ranks {
		rs := td.ResourceSpans().AppendEmpty()
		putRankResource(rs.Resource(), "run-8f3a2c", rank, ranks)
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("nemo_lens.megatron")
		ss.Scope().SetVersion("0.4.1")
		var traceID pcommon.TraceID
		copy(traceID[:], idFor(1, 0))
		var stepSpanID pcommon.SpanID
		for i := range spansPerRank {
			s := ss.Spans().AppendEmpty()
			name := megatronSpanNames[i%len(megatronSpanNames)]
			s.SetName(name)
			s.SetTraceID(traceID)
			var sid pcommon.SpanID
			copy(sid[:], idFor(uint64(rank)+2, i)[:8])
			s.SetSpanID(sid)
			iteration := int64(i / len(megatronSpanNames))
			if i%len(megatronSpanNames) == 0 {
				stepSpanID = sid
				var root pcommon.SpanID
				copy(root[:], idFor(uint64(rank)+2, -1)[:8])
				s.SetParentSpanID(root)
			} else {
				s.SetParentSpanID(stepSpanID)
			}
			s.SetKind(ptrace.SpanKindInternal)
			start := megatronStart + pcommon.Timestamp(i)*pcommon.Timestamp(time.Millisecond)
			s.SetStartTimestamp(start)
			s.SetEndTimestamp(start + pcommon.Timestamp(850*time.Microsecond))
			s.Status().SetCode(ptrace.StatusCodeOk)
			a := s.Attributes()
			a.PutInt("megatron.iteration", iteration)
			a.PutDouble("megatron.loss", 2.5-float64(iteration)*0.001)
			a.PutDouble("megatron.grad_norm", 1.25)
			a.PutInt("megatron.num_microbatches", 8)
			a.PutInt("megatron.microbatch_id", int64(i%8))
			a.PutBool("megatron.update_successful", true)
			a.PutInt("dl.pipeline_parallel.rank", int64(rank%2))
			a.PutInt("dl.tensor_parallel.rank", int64(rank%2))
			a.PutInt("dl.data_parallel.rank", int64(rank/4))
			a.PutDouble("megatron.learning_rate", 0.00015)
			a.PutInt("megatron.global_batch_size", 1024)
			a.PutInt("megatron.micro_batch_size", 4)
			a.PutInt("megatron.seq_length", 4096)
			a.PutInt("megatron.tokens", 4194304)
			a.PutStr("megatron.model", "gpt3-8b")
			a.PutStr("megatron.phase", "train")
			a.PutInt("megatron.layer", int64(i%32))
			a.PutDouble("megatron.loss_scale", 65536)
			a.PutBool("megatron.skipped", false)
			a.PutStr("cuda.device", fmt.Sprintf("cuda:%d", rank%8))
		}
	}
	return td
}

var megatronGauges = []string{
	"megatron.training.loss",
	"megatron.training.throughput_tflops",
	"megatron.training.tokens_per_sec",
	"megatron.training.grad_norm",
	"megatron.training.learning_rate",
	"megatron.training.memory_allocated_gb",
}

// megatronMetrics returns ranks resources with pointsPerRank data points
// each: the training gauges, the step duration histogram and the skipped
// iterations counter.
func megatronMetrics(ranks, pointsPerRank int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	for rank := range ranks {
		rm := md.ResourceMetrics().AppendEmpty()
		putRankResource(rm.Resource(), "run-8f3a2c", rank, ranks)
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName("nemo_lens.megatron")
		sm.Scope().SetVersion("0.4.1")
		kinds := len(megatronGauges) + 2
		for k := range kinds {
			m := sm.Metrics().AppendEmpty()
			n := pointsPerRank / kinds
			if k < pointsPerRank%kinds {
				n++
			}
			switch {
			case k < len(megatronGauges):
				m.SetName(megatronGauges[k])
				m.SetUnit("1")
				dps := m.SetEmptyGauge().DataPoints()
				for i := range n {
					dp := dps.AppendEmpty()
					putPointHead(dp.Attributes(), i)
					dp.SetTimestamp(megatronStart + pcommon.Timestamp(i)*pcommon.Timestamp(time.Second))
					dp.SetDoubleValue(2.5 - float64(i)*0.01)
				}
			case k == len(megatronGauges):
				m.SetName("megatron.training.step_duration_ms")
				m.SetUnit("ms")
				h := m.SetEmptyHistogram()
				h.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
				for i := range n {
					dp := h.DataPoints().AppendEmpty()
					putPointHead(dp.Attributes(), i)
					dp.SetStartTimestamp(megatronStart + pcommon.Timestamp(i)*pcommon.Timestamp(time.Second))
					dp.SetTimestamp(megatronStart + pcommon.Timestamp(i+1)*pcommon.Timestamp(time.Second))
					dp.SetCount(10)
					dp.SetSum(8500.5)
					dp.SetMin(801.25)
					dp.SetMax(902.75)
					dp.BucketCounts().FromRaw([]uint64{0, 0, 1, 6, 3, 0})
					dp.ExplicitBounds().FromRaw([]float64{100, 250, 500, 850, 1000})
				}
			default:
				m.SetName("megatron.training.skipped_iters")
				m.SetUnit("{iterations}")
				s := m.SetEmptySum()
				s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
				s.SetIsMonotonic(true)
				for i := range n {
					dp := s.DataPoints().AppendEmpty()
					putPointHead(dp.Attributes(), i)
					dp.SetStartTimestamp(megatronStart)
					dp.SetTimestamp(megatronStart + pcommon.Timestamp(i)*pcommon.Timestamp(time.Second))
					dp.SetIntValue(int64(i / 50))
				}
			}
		}
	}
	return md
}

func putPointHead(a pcommon.Map, i int) {
	a.PutInt("megatron.iteration", int64(i*10))
	a.PutStr("megatron.phase", "train")
	a.PutInt("dl.pipeline_parallel.rank", 0)
}

// megatronLogs returns ranks resources with recordsPerRank log records each.
func megatronLogs(ranks, recordsPerRank int) plog.Logs {
	ld := plog.NewLogs()
	for rank := range ranks {
		rl := ld.ResourceLogs().AppendEmpty()
		putRankResource(rl.Resource(), "run-8f3a2c", rank, ranks)
		sl := rl.ScopeLogs().AppendEmpty()
		sl.Scope().SetName("megatron.training")
		for i := range recordsPerRank {
			lr := sl.LogRecords().AppendEmpty()
			ts := megatronStart + pcommon.Timestamp(i)*pcommon.Timestamp(time.Millisecond)
			lr.SetTimestamp(ts)
			lr.SetObservedTimestamp(ts + 1000)
			lr.SetSeverityNumber(plog.SeverityNumberInfo)
			lr.SetSeverityText("INFO")
			lr.Body().SetStr(fmt.Sprintf(" iteration %8d/  500000 | consumed samples: %12d | elapsed time per iteration (ms): 850.5 | learning rate: 1.500000E-04 | lm loss: 2.512345E+00 | loss scale: 65536.0 | grad norm: 1.250 |", i, i*1024))
			a := lr.Attributes()
			a.PutInt("megatron.iteration", int64(i))
			a.PutStr("code.function", "training_log")
			a.PutStr("code.filepath", "megatron/training/training.py")
			a.PutInt("code.lineno", 1234)
			a.PutStr("logger.name", "megatron.training")
			a.PutInt("thread.id", 140234)
			a.PutDouble("megatron.loss", 2.512345)
			a.PutBool("megatron.update_successful", true)
			var tid pcommon.TraceID
			copy(tid[:], idFor(1, 0))
			lr.SetTraceID(tid)
			var sid pcommon.SpanID
			copy(sid[:], idFor(uint64(rank)+2, i)[:8])
			lr.SetSpanID(sid)
		}
	}
	return ld
}
