// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
)

// Signals the load generator can send, and the item each one counts.
const (
	signalTraces  = "traces"
	signalMetrics = "metrics"
	signalLogs    = "logs"
)

// iterationPlaceholder is added to the step index when a template is built, so
// that pdata encodes megatron.iteration as a 5-byte varint; the patcher then
// rewrites it in place, in 5 bytes, with the real iteration (see patch.go).
const iterationPlaceholder = 1 << 28

// job describes the synthetic training job whose telemetry is replayed.
type job struct {
	signal       string
	ranks        int
	tp, pp       int
	microbatches int
	// stepsPerRequest is how many whole steps of one rank one request carries.
	stepsPerRequest int
	stepDuration    time.Duration
	// stragglers is the number of ranks whose compute takes straggleFactor
	// times longer.
	stragglers     int
	straggleFactor float64
	// unsynchronised gives every rank its own step durations (a straggler's
	// whole step is longer); by default steps are synchronous, as with data
	// parallelism: every rank's step lasts the same, a straggler computes
	// longer and the others wait for it in grad sync.
	unsynchronised bool
	// traceScope is "rank" (one trace per rank for the whole run, as Megatron
	// does: the job span is the root) or "step" (one trace per train step).
	traceScope string
	// rankKeys is "nv" (nv.dl.*), "dl" (dl.*, older) or "mixed" (alternating,
	// every third rank sending its identity as strings).
	rankKeys    string
	extraAttrs  int
	runID       string
	serviceName string
	seed        uint64
}

// itemsPerStep is what one rank emits per step for the job's signal.
func (j job) itemsPerStep() int {
	switch j.signal {
	case signalMetrics:
		return lensfixture.MetricsPerStep // Megatron-LM's training metrics, one point each
	case signalLogs:
		return 1
	default:
		return j.spansPerStep()
	}
}

// itemsPerRequest is the number of spans, data points or log records in one request.
func (j job) itemsPerRequest() int { return j.stepsPerRequest * j.itemsPerStep() }

// mix is the splitmix64 finalizer: a cheap, well-spread hash for ids.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func (j job) hash(parts ...uint64) uint64 {
	h := mix(j.seed)
	for _, p := range parts {
		h = mix(h ^ p)
	}
	if h == 0 {
		h = 1
	}
	return h
}

// Span ids and trace ids are derived from (rank, step, span index), so a rank
// can name the span of its pipeline peer that a link points to.
func (j job) spanID(rank, step, idx int) pcommon.SpanID {
	var id pcommon.SpanID
	binary.LittleEndian.PutUint64(id[:], j.hash(1, uint64(rank), uint64(step), uint64(idx)))
	return id
}

func (j job) trainSpanID(rank int) pcommon.SpanID {
	var id pcommon.SpanID
	binary.LittleEndian.PutUint64(id[:], j.hash(2, uint64(rank)))
	return id
}

func (j job) traceID(rank, step int) pcommon.TraceID {
	if j.traceScope != "step" {
		step = -1
	}
	var id pcommon.TraceID
	binary.LittleEndian.PutUint64(id[:8], j.hash(3, uint64(rank)))
	binary.LittleEndian.PutUint64(id[8:], j.hash(4, uint64(rank), uint64(step)))
	return id
}

// runIDOf is the nemo.run.id of a rank: the shared id, none, or (for
// "random") a per-process id, as when NeMo Lens finds no run id to share.
func (j job) runIDOf(rank int) string {
	if j.runID == "random" {
		return fmt.Sprintf("%012x", j.hash(5, uint64(rank))&0xffffffffffff)
	}
	return j.runID
}

// topology returns the Megatron parallel ranks of a global rank, with the
// default "tp-dp-pp" order: tensor parallel varies fastest, pipeline slowest.
func (j job) topology(rank int) (tpRank, dpRank, ppRank, dp int) {
	dp = j.ranks / (j.tp * j.pp)
	return rank % j.tp, (rank / j.tp) % dp, rank / (j.tp * dp), dp
}

// isStraggler reports whether rank is one of the -stragglers slow ranks,
// spread evenly over the ranks.
func (j job) isStraggler(rank int) bool {
	return j.stragglers > 0 && rank%(j.ranks/j.stragglers) == 0 && rank/(j.ranks/j.stragglers) < j.stragglers
}

// stepDurations returns the duration of each step of a template for a rank:
// a few percent of deterministic jitter. Synchronous steps last the same on
// every rank (the jitter depends on the step only); unsynchronised ones
// jitter per rank, and a straggler's are straggleFactor times longer.
func (j job) stepDurations(rank int) []time.Duration {
	slow, jitterRank := 1.0, uint64(0)
	if j.unsynchronised {
		jitterRank = uint64(rank)
		if j.isStraggler(rank) {
			slow = j.straggleFactor
		}
	}
	d := make([]time.Duration, j.stepsPerRequest)
	for s := range d {
		jitter := float64(j.hash(6, jitterRank, uint64(s))%1000)/10000 - 0.05
		d[s] = time.Duration(float64(j.stepDuration) * slow * (1 + jitter))
	}
	return d
}

// rankOf is the identity one NeMo Lens rank sends (bench/README.md, "What a
// rank sends"): the fixture's rank in the -rank-keys spelling and type, with
// the job's topology sizes, job and run uuids, slurm.* and wandb.* as extras.
func (j job) rankOf(rank int) lensfixture.Rank {
	r := lensfixture.Rank{
		Run: j.runIDOf(rank), Rank: int64(rank), WorldSize: int64(j.ranks), ServiceName: j.serviceName,
		LegacyKeys: j.rankKeys == "dl" || (j.rankKeys == "mixed" && rank%2 == 1),
		AsString:   j.rankKeys == "mixed" && rank%3 == 0,
	}
	num := func(k string, v int) lensfixture.KeyValue {
		if r.AsString {
			return kv(k, strconv.Itoa(v))
		}
		return kv(k, int64(v))
	}
	_, _, _, dp := j.topology(rank)
	if r.LegacyKeys {
		r.Extra = append(r.Extra, num("dl.tensor_parallel.size", j.tp), num("dl.pipeline_parallel.size", j.pp), num("dl.data_parallel.size", dp))
	} else {
		r.Extra = append(r.Extra, num("nv.dl.topology.size.tp", j.tp), num("nv.dl.topology.size.pp", j.pp), num("nv.dl.topology.size.dp", dp),
			kv(attrkey.DLJobUUID, fmt.Sprintf("%016x", j.hash(7))), kv("nv.dl.run.uuid", fmt.Sprintf("%016x", j.hash(8))))
	}
	nodes := (j.ranks + lensfixture.GPUsPerNode - 1) / lensfixture.GPUsPerNode
	r.Extra = append(r.Extra,
		kv("host.gpu.count", int64(lensfixture.GPUsPerNode)),
		kv(attrkey.SlurmJobID, "4242424"),
		kv("slurm.job.name", "megatron-gpt-pretrain"),
		kv("slurm.nodelist", fmt.Sprintf("node[000-%03d]", nodes-1)), // as the fixture names hosts
		kv("slurm.nnodes", strconv.Itoa(nodes)),
		kv("slurm.ntasks", strconv.Itoa(j.ranks)),
		kv("slurm.partition", "batch"),
		kv("slurm.cluster.name", "bench"),
		kv(attrkey.WandbEntity, "nemo-bench"),
		kv(attrkey.WandbProject, "loadgen"),
		kv("deployment.environment", "bench"),
	)
	return r
}

func kv(key string, value any) lensfixture.KeyValue {
	return lensfixture.KeyValue{Key: key, Value: value}
}

func (j job) putExtra(attrs pcommon.Map) {
	for i := 0; i < j.extraAttrs; i++ {
		attrs.PutStr("bench.attr."+strconv.Itoa(i), "value-"+strconv.Itoa(i))
	}
}

// buildRequest returns the OTLP request of one rank's template, marshaled,
// with its steps ending at ref (Unix ns). Step s carries
// megatron.iteration = iterationPlaceholder+s until patched.
func (j job) buildRequest(rank int, ref int64) ([]byte, error) {
	switch j.signal {
	case signalMetrics:
		return pmetricotlp.NewExportRequestFromMetrics(j.metrics(rank, ref)).MarshalProto()
	case signalLogs:
		return plogotlp.NewExportRequestFromLogs(j.logs(rank, ref)).MarshalProto()
	default:
		return ptraceotlp.NewExportRequestFromTraces(j.traces(rank, ref)).MarshalProto()
	}
}

// stepStarts returns the start of each step (Unix ns) so that the last ends at ref.
func (j job) stepStarts(rank int, ref int64) (starts []int64, durs []time.Duration) {
	durs = j.stepDurations(rank)
	starts = make([]int64, len(durs))
	t := ref
	for s := len(durs) - 1; s >= 0; s-- {
		t -= int64(durs[s])
		starts[s] = t
	}
	return starts, durs
}

func (j job) metrics(rank int, ref int64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	j.rankOf(rank).PutResource(rm.Resource().Attributes())
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(lensfixture.ScopeName)
	starts, durs := j.stepStarts(rank, ref)
	processStart := pcommon.Timestamp(starts[0] - int64(time.Hour))
	ms := sm.Metrics()

	hist := ms.AppendEmpty()
	hist.SetName(lensfixture.StepDurationMetric)
	hist.SetUnit("ms")
	h := hist.SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	bounds := []float64{0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000}
	var count uint64
	var sum float64
	buckets := make([]uint64, len(bounds)+1)
	for s := range j.stepsPerRequest {
		ms := float64(durs[s]) / float64(time.Millisecond)
		count++
		sum += ms
		b := len(bounds)
		for k, bound := range bounds {
			if ms <= bound {
				b = k
				break
			}
		}
		buckets[b]++
		dp := h.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(processStart)
		dp.SetTimestamp(pcommon.Timestamp(starts[s] + int64(durs[s])))
		dp.SetCount(count)
		dp.SetSum(sum)
		dp.ExplicitBounds().FromRaw(bounds)
		dp.BucketCounts().FromRaw(buckets)
		j.putExtra(dp.Attributes())
	}

	gauges := []struct {
		name, unit string
		value      func(s int) float64
	}{
		{lensfixture.LossMetric, "", func(s int) float64 { return lensfixture.Loss(int64(s)) }},
		{lensfixture.TFLOPSMetric, "", func(s int) float64 { return 180 + float64(j.hash(10, uint64(rank), uint64(s))%100)/10 }},
		{lensfixture.TokensPerSecMetric, "", func(s int) float64 { return 51200 * float64(j.stepDuration) / float64(durs[s]) }},
		{lensfixture.GradNormMetric, "", func(s int) float64 { return 1.0 + float64(j.hash(9, uint64(rank), uint64(s))%500)/1000 }},
		{lensfixture.LearningRateMetric, "", func(int) float64 { return 3e-4 }},
		{lensfixture.MemoryMetric, "GBy", func(int) float64 { return 61.5 }},
	}
	for _, g := range gauges {
		m := ms.AppendEmpty()
		m.SetName(g.name)
		m.SetUnit(g.unit)
		gauge := m.SetEmptyGauge()
		for s := range j.stepsPerRequest {
			dp := gauge.DataPoints().AppendEmpty()
			dp.SetTimestamp(pcommon.Timestamp(starts[s] + int64(durs[s])))
			dp.SetDoubleValue(g.value(s))
			j.putExtra(dp.Attributes())
		}
	}

	skipped := ms.AppendEmpty()
	skipped.SetName(lensfixture.SkippedItersMetric)
	sum0 := skipped.SetEmptySum()
	sum0.SetIsMonotonic(true)
	sum0.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for s := range j.stepsPerRequest {
		dp := sum0.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(processStart)
		dp.SetTimestamp(pcommon.Timestamp(starts[s] + int64(durs[s])))
		dp.SetIntValue(0)
		j.putExtra(dp.Attributes())
	}
	return md
}

// logLine is Megatron's training log line; the iteration is a fixed-width
// field, so the patcher can rewrite it in place.
func logLine(iteration int, elapsed time.Duration, loss float64) string {
	return fmt.Sprintf(" iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %.1f | learning rate: %.6E | global batch size: %5d | lm loss: %.6E |",
		iteration, 99999999, 1024*(iteration%iterationPlaceholder+1), float64(elapsed)/float64(time.Millisecond), 3e-4, 1024, loss)
}

// iterationDigits is where the fixed-width iteration starts in logLine and how wide it is.
const (
	iterationDigitsOffset = len(" iteration ")
	iterationDigitsWidth  = 8
)

func (j job) logs(rank int, ref int64) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	j.rankOf(rank).PutResource(rl.Resource().Attributes())
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName(lensfixture.ScopeName)
	starts, durs := j.stepStarts(rank, ref)
	for s := range j.stepsPerRequest {
		lr := sl.LogRecords().AppendEmpty()
		end := pcommon.Timestamp(starts[s] + int64(durs[s]))
		lr.SetTimestamp(end)
		lr.SetObservedTimestamp(end)
		lr.SetSeverityNumber(plog.SeverityNumberInfo)
		lr.SetSeverityText("INFO")
		// The iteration field has a fixed width: the patcher rewrites its digits in place.
		lr.Body().SetStr(logLine(s, durs[s], lensfixture.Loss(int64(s))))
		lr.SetTraceID(j.traceID(rank, s))
		lr.SetSpanID(j.spanID(rank, s, 0))
		lr.Attributes().PutInt(attrkey.MegatronIteration, int64(iterationPlaceholder+s))
		j.putExtra(lr.Attributes())
	}
	return ld
}
