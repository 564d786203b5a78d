// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter

import (
	"fmt"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
)

// Batches shaped like what a Megatron-LM job sends through NeMo Lens
// (internal/testing/lensfixture): one resource per rank, the spans of its train
// steps, its training metrics and logs. On top of the fixture, every span,
// data point and log record carries the attributes Megatron-LM adds (~20 per
// span), so that the records are as large as real ones: the benchmarks
// count records per second.

// megatronRank is rank of a worldSize-rank job on SLURM: the fixture's
// identity plus W&B, SLURM and topology attributes.
func megatronRank(rank, worldSize int) lensfixture.Rank {
	kv := func(k string, v any) lensfixture.KeyValue { return lensfixture.KeyValue{Key: k, Value: v} }
	return lensfixture.Rank{
		Run: "run-8f3a2c", Rank: int64(rank), WorldSize: int64(worldSize), ServiceName: "megatron",
		Extra: []lensfixture.KeyValue{
			kv("wandb.entity", "nvidia-research"), kv("wandb.project", "gpt3-8b-pretrain"), kv("deployment.environment", "prod"),
			kv("dl.tensor_parallel.size", int64(2)), kv("dl.pipeline_parallel.size", int64(2)), kv("dl.data_parallel.size", int64(worldSize/4)),
			kv("slurm.job.id", "4242424"), kv("slurm.job.name", "gpt3-8b"), kv("slurm.nodelist", "node[001-008]"),
			kv("host.gpu.count", int64(8)),
		},
	}
}

// megatronRun is a synchronous job of ranks ranks; with pipeline
// parallelism, every step starts with a receive from the previous stage.
func megatronRun(ranks int) lensfixture.Run {
	step := lensfixture.DefaultStep
	step.RecvWait = 5 * time.Millisecond
	run := lensfixture.Run{Step: step}
	for r := range ranks {
		run.Ranks = append(run.Ranks, megatronRank(r, ranks))
	}
	return run
}

// megatronTraces returns ranks resources with spansPerRank spans each: the
// rank's steps from iteration 0, cut after spansPerRank spans as a rank's
// BatchSpanProcessor cuts its exports, wherever a step is.
func megatronTraces(ranks, spansPerRank int) ptrace.Traces {
	run := megatronRun(ranks)
	td := ptrace.NewTraces()
	for _, rank := range run.Ranks {
		spans := lensfixture.AppendResource(td, rank)
		run.AppendSpans(spans, rank, spansPerRank)
		for i := range spans.Len() {
			putSpanAttributes(spans.At(i), rank.Rank, i)
		}
	}
	return td
}

// putSpanAttributes gives the i-th span of rank the 20 attributes Megatron-LM
// spans carry; the fixture set megatron.iteration on step spans only.
func putSpanAttributes(s ptrace.Span, rank int64, i int) {
	iteration := lensfixture.ParseSpanID(s.SpanID()).Iteration
	s.Status().SetCode(ptrace.StatusCodeOk)
	a := s.Attributes()
	a.PutInt(attrkey.MegatronIteration, iteration)
	a.PutDouble("megatron.loss", lensfixture.Loss(iteration))
	a.PutDouble("megatron.grad_norm", 1.25)
	a.PutInt("megatron.num_microbatches", 8)
	a.PutInt("megatron.microbatch_id", int64(i%8))
	a.PutBool("megatron.update_successful", true)
	a.PutInt("dl.pipeline_parallel.rank", rank%2)
	a.PutInt("dl.tensor_parallel.rank", rank%2)
	a.PutInt("dl.data_parallel.rank", rank/4)
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

// megatronMetrics returns ranks resources with pointsPerRank data points
// each: the training metrics of the rank's steps from iteration 0, cut
// after pointsPerRank points.
func megatronMetrics(ranks, pointsPerRank int) pmetric.Metrics {
	run := megatronRun(ranks)
	md := pmetric.NewMetrics()
	for _, rank := range run.Ranks {
		rm := md.ResourceMetrics().AppendEmpty()
		rank.PutResource(rm.Resource().Attributes())
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName(lensfixture.ScopeName)
		metrics := sm.Metrics()
		for it := int64(0); metrics.Len() < pointsPerRank; it++ {
			from := metrics.Len()
			run.AppendMetrics(metrics, rank, it)
			for i := from; i < metrics.Len(); i++ {
				putPointHead(pointAttributes(metrics.At(i)), it)
			}
		}
		// Every metric of the fixture holds one point.
		n := 0
		metrics.RemoveIf(func(pmetric.Metric) bool { n++; return n > pointsPerRank })
	}
	return md
}

// pointAttributes are the attributes of a fixture metric's one data point.
func pointAttributes(m pmetric.Metric) pcommon.Map {
	switch m.Type() {
	case pmetric.MetricTypeHistogram:
		return m.Histogram().DataPoints().At(0).Attributes()
	case pmetric.MetricTypeSum:
		return m.Sum().DataPoints().At(0).Attributes()
	default:
		return m.Gauge().DataPoints().At(0).Attributes()
	}
}

func putPointHead(a pcommon.Map, iteration int64) {
	a.PutInt(attrkey.MegatronIteration, iteration)
	a.PutStr("megatron.phase", "train")
	a.PutInt("dl.pipeline_parallel.rank", 0)
}

// megatronLogs returns ranks resources with recordsPerRank log records
// each: the training_log line of the rank's steps from iteration 0, each
// tied to its step span.
func megatronLogs(ranks, recordsPerRank int) plog.Logs {
	run := megatronRun(ranks)
	ld := plog.NewLogs()
	for _, rank := range run.Ranks {
		rl := ld.ResourceLogs().AppendEmpty()
		rank.PutResource(rl.Resource().Attributes())
		sl := rl.ScopeLogs().AppendEmpty()
		sl.Scope().SetName("megatron.training")
		for it := range int64(recordsPerRank) {
			ms := float64(run.StepOf(rank.Rank, it).Duration()) / float64(time.Millisecond)
			body := fmt.Sprintf(" iteration %8d/  500000 | consumed samples: %12d | elapsed time per iteration (ms): %.1f | learning rate: 1.500000E-04 | lm loss: %E | loss scale: 65536.0 | grad norm: 1.250 |",
				it, it*1024, ms, lensfixture.Loss(it))
			lr := run.AppendLog(sl.LogRecords(), rank, it, plog.SeverityNumberInfo, body)
			lr.SetObservedTimestamp(lr.Timestamp() + 1000)
			lr.SetTraceID(run.TraceID(rank, it))
			lr.SetSpanID(lensfixture.SpanID(lensfixture.KindStep, rank.Rank, it, 0))
			a := lr.Attributes()
			a.PutStr("code.function", "training_log")
			a.PutStr("code.filepath", "megatron/training/training.py")
			a.PutInt("code.lineno", 1234)
			a.PutStr("logger.name", "megatron.training")
			a.PutInt("thread.id", 140234)
			a.PutDouble("megatron.loss", lensfixture.Loss(it))
			a.PutBool("megatron.update_successful", true)
		}
	}
	return ld
}
