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
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
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

// gpusPerNode sets nv.dl.local_rank and host.name: ranks 0-7 are on node 0, ...
const gpusPerNode = 8

// metricsPerStep is the number of data points a rank reports per step: the
// Megatron-LM's training metrics (bench/README.md, "What a rank sends"), one point each.
const metricsPerStep = 8

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

// spansPerStep is the size of one megatron.train_step subtree.
func (j job) spansPerStep() int { return 8 + 3*j.microbatches }

// itemsPerStep is what one rank emits per step for the job's signal.
func (j job) itemsPerStep() int {
	switch j.signal {
	case signalMetrics:
		return metricsPerStep
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

// computeShare is the part of the step a rank spends in
// megatron.forward_backward. In a synchronous job with stragglers the
// straggler computes for fullCompute of the step and every other rank for
// straggleFactor times less, waiting the rest in megatron.grad_sync.finish.
func (j job) computeShare(rank int) float64 {
	if j.unsynchronised || j.stragglers == 0 || j.isStraggler(rank) {
		return fullCompute
	}
	return fullCompute / max(j.straggleFactor, 1)
}

// resource fills the resource attributes one NeMo Lens rank sets (bench/README.md,
// "What a rank sends").
func (j job) resource(rank int, attrs pcommon.Map) {
	_, _, _, dp := j.topology(rank)
	legacy := j.rankKeys == "dl" || (j.rankKeys == "mixed" && rank%2 == 1)
	asString := j.rankKeys == "mixed" && rank%3 == 0
	prefix := "nv.dl."
	if legacy {
		prefix = "dl."
	}
	putNum := func(k string, v int) {
		if asString {
			attrs.PutStr(k, strconv.Itoa(v))
		} else {
			attrs.PutInt(k, int64(v))
		}
	}
	runID := j.runIDOf(rank)
	instance := runID
	if instance == "" {
		instance = "norun"
	}
	attrs.PutStr("service.name", j.serviceName)
	attrs.PutStr("service.instance.id", fmt.Sprintf("%s-rank%d", instance, rank))
	if runID != "" {
		attrs.PutStr("nemo.run.id", runID)
	}
	putNum(prefix+"rank", rank)
	putNum(prefix+"world_size", j.ranks)
	putNum(prefix+"local_rank", rank%gpusPerNode)
	if legacy {
		putNum("dl.tensor_parallel.size", j.tp)
		putNum("dl.pipeline_parallel.size", j.pp)
		putNum("dl.data_parallel.size", dp)
	} else {
		putNum("nv.dl.topology.size.tp", j.tp)
		putNum("nv.dl.topology.size.pp", j.pp)
		putNum("nv.dl.topology.size.dp", dp)
		attrs.PutStr("nv.dl.job.uuid", fmt.Sprintf("%016x", j.hash(7)))
		attrs.PutStr("nv.dl.run.uuid", fmt.Sprintf("%016x", j.hash(8)))
	}
	nodes := (j.ranks + gpusPerNode - 1) / gpusPerNode
	attrs.PutStr("host.name", fmt.Sprintf("node%04d", rank/gpusPerNode))
	attrs.PutInt("process.pid", int64(20000+rank%gpusPerNode))
	attrs.PutInt("host.gpu.count", gpusPerNode)
	attrs.PutStr("slurm.job.id", "4242424")
	attrs.PutStr("slurm.job.name", "megatron-gpt-pretrain")
	attrs.PutStr("slurm.nodelist", fmt.Sprintf("node[0000-%04d]", nodes-1))
	attrs.PutStr("slurm.nnodes", strconv.Itoa(nodes))
	attrs.PutStr("slurm.ntasks", strconv.Itoa(j.ranks))
	attrs.PutStr("slurm.partition", "batch")
	attrs.PutStr("slurm.cluster.name", "bench")
	attrs.PutStr("wandb.entity", "nemo-bench")
	attrs.PutStr("wandb.project", "loadgen")
	attrs.PutStr("deployment.environment", "bench")
}

func (j job) putExtra(attrs pcommon.Map) {
	for i := 0; i < j.extraAttrs; i++ {
		attrs.PutStr("bench.attr."+strconv.Itoa(i), "value-"+strconv.Itoa(i))
	}
}

// stepSpan is one span of a train step: its name, parent (index in the step,
// -1 for the step's own parent), and start and end as fractions of the step.
type stepSpan struct {
	name       string
	parent     int
	start, end float64
}

// fullCompute is the share of a step in megatron.forward_backward for a rank
// nobody waits for.
const fullCompute = 0.7

// stepLayout is the megatron.train_step subtree of the Megatron-LM span tree
// for m micro-batches: 8+3m spans (20 for m=4), the rank computing for the
// first compute (at most fullCompute) of the step; grad sync waits from
// there to 0.85, then the optimizer step.
func stepLayout(m int, compute float64) []stepSpan {
	c := compute / fullCompute // scales the compute spans
	spans := []stepSpan{
		{"megatron.train_step", -1, 0, 1},
		{"megatron.forward_backward", 0, 0, compute},
		{"megatron.p2p.recv_forward", 1, 0, 0.02 * c},
		{"megatron.pp.recv_forward.linked", 1, 0, 0.02 * c},
	}
	per := 0.66 / float64(m)
	for mb := range m {
		b := 0.02 + float64(mb)*per
		fwd := len(spans)
		spans = append(spans,
			stepSpan{"megatron.microbatch.forward", 1, b * c, (b + 0.4*per) * c},
			stepSpan{"megatron.layer.forward", fwd, (b + 0.05*per) * c, (b + 0.35*per) * c},
			stepSpan{"megatron.microbatch.backward", 1, (b + 0.4*per) * c, (b + per) * c},
		)
	}
	return append(spans,
		stepSpan{"megatron.p2p.send_forward", 1, 0.68 * c, compute},
		stepSpan{"megatron.grad_sync.start", 0, compute, compute + 0.05},
		stepSpan{"megatron.grad_sync.finish", 0, compute + 0.05, 0.85},
		stepSpan{"megatron.optimizer_step", 0, 0.85, 1},
	)
}

// sendForwardIndex is the index of megatron.p2p.send_forward in stepLayout,
// the span a pipeline peer's megatron.pp.recv_forward.linked links to.
func sendForwardIndex(m int) int { return 4 + 3*m }

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

func (j job) traces(rank int, ref int64) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	j.resource(rank, rs.Resource().Attributes())
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("megatron")
	layout := stepLayout(j.microbatches, j.computeShare(rank))
	tpRank, dpRank, ppRank, dp := j.topology(rank)
	starts, durs := j.stepStarts(rank, ref)
	spans := ss.Spans()
	spans.EnsureCapacity(len(layout) * j.stepsPerRequest)
	for s := range j.stepsPerRequest {
		loss := 2.0 + 8.0/float64(s+2)
		at := func(f float64) pcommon.Timestamp {
			return pcommon.Timestamp(starts[s] + int64(f*float64(durs[s])))
		}
		for i, l := range layout {
			sp := spans.AppendEmpty()
			sp.SetTraceID(j.traceID(rank, s))
			sp.SetSpanID(j.spanID(rank, s, i))
			switch {
			case l.parent >= 0:
				sp.SetParentSpanID(j.spanID(rank, s, l.parent))
			case j.traceScope != "step":
				sp.SetParentSpanID(j.trainSpanID(rank))
			}
			sp.SetName(l.name)
			sp.SetKind(ptrace.SpanKindInternal)
			sp.SetStartTimestamp(at(l.start))
			sp.SetEndTimestamp(at(l.end))
			a := sp.Attributes()
			switch l.name {
			case "megatron.train_step":
				a.PutInt("megatron.iteration", int64(iterationPlaceholder+s))
				a.PutInt("megatron.num_microbatches", int64(j.microbatches))
				a.PutDouble("megatron.loss", loss)
				a.PutDouble("megatron.grad_norm", 1.0+float64(j.hash(9, uint64(rank), uint64(s))%500)/1000)
				a.PutBool("megatron.update_successful", true)
				a.PutDouble("megatron.learning_rate", 3e-4)
				a.PutInt("megatron.global_batch_size", 1024)
				a.PutInt("megatron.seq_length", 4096)
				a.PutInt("megatron.consumed_samples", int64(1024*(s+1)))
				a.PutInt("dl.pipeline_parallel.rank", int64(ppRank))
				a.PutInt("dl.tensor_parallel.rank", int64(tpRank))
				a.PutInt("dl.data_parallel.rank", int64(dpRank))
			case "megatron.forward_backward":
				a.PutInt("megatron.num_microbatches", int64(j.microbatches))
				a.PutInt("dl.pipeline_parallel.rank", int64(ppRank))
				a.PutBool("megatron.forward_only", false)
			case "megatron.microbatch.forward", "megatron.microbatch.backward":
				a.PutInt("megatron.microbatch_id", int64((i-4)/3))
				a.PutInt("dl.pipeline_parallel.rank", int64(ppRank))
			case "megatron.layer.forward":
				a.PutInt("megatron.microbatch_id", int64((i-4)/3))
				a.PutInt("megatron.layer.number", int64(ppRank*32))
			case "megatron.p2p.recv_forward", "megatron.p2p.send_forward", "megatron.pp.recv_forward.linked":
				a.PutInt("dl.pipeline_parallel.rank", int64(ppRank))
				a.PutStr("megatron.p2p.tensor_shape", "[4096, 1, 8192]")
				a.PutInt("megatron.p2p.bytes", 4096*8192*2)
				if l.name == "megatron.pp.recv_forward.linked" && ppRank > 0 {
					peer := rank - j.tp*dp
					link := sp.Links().AppendEmpty()
					link.SetTraceID(j.traceID(peer, s))
					link.SetSpanID(j.spanID(peer, s, sendForwardIndex(j.microbatches)))
					link.Attributes().PutInt("dl.pipeline_parallel.rank", int64(ppRank-1))
				}
			case "megatron.grad_sync.start", "megatron.grad_sync.finish":
				a.PutInt("megatron.grad_sync.buckets", 40)
				a.PutInt("dl.data_parallel.size", int64(dp))
			case "megatron.optimizer_step":
				a.PutBool("megatron.update_successful", true)
				a.PutDouble("megatron.grad_norm", 1.25)
				a.PutDouble("megatron.learning_rate", 3e-4)
			}
			j.putExtra(a)
		}
	}
	return td
}

func (j job) metrics(rank int, ref int64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	j.resource(rank, rm.Resource().Attributes())
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("megatron")
	starts, durs := j.stepStarts(rank, ref)
	processStart := pcommon.Timestamp(starts[0] - int64(time.Hour))
	ms := sm.Metrics()

	hist := ms.AppendEmpty()
	hist.SetName("megatron.training.step_duration_ms")
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
		{"megatron.training.loss", "", func(s int) float64 { return 2.0 + 8.0/float64(s+2) }},
		{"megatron.training.throughput_tflops", "", func(s int) float64 { return 180 + float64(j.hash(10, uint64(rank), uint64(s))%100)/10 }},
		{"megatron.training.tokens_per_sec", "", func(s int) float64 { return 51200 * float64(j.stepDuration) / float64(durs[s]) }},
		{"megatron.training.grad_norm", "", func(s int) float64 { return 1.0 + float64(j.hash(9, uint64(rank), uint64(s))%500)/1000 }},
		{"megatron.training.learning_rate", "", func(int) float64 { return 3e-4 }},
		{"megatron.training.memory_allocated_gb", "GBy", func(int) float64 { return 61.5 }},
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
	skipped.SetName("megatron.training.skipped_iters")
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
	j.resource(rank, rl.Resource().Attributes())
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName("megatron")
	starts, durs := j.stepStarts(rank, ref)
	for s := range j.stepsPerRequest {
		lr := sl.LogRecords().AppendEmpty()
		end := pcommon.Timestamp(starts[s] + int64(durs[s]))
		lr.SetTimestamp(end)
		lr.SetObservedTimestamp(end)
		lr.SetSeverityNumber(plog.SeverityNumberInfo)
		lr.SetSeverityText("INFO")
		// The iteration field has a fixed width: the patcher rewrites its digits in place.
		lr.Body().SetStr(logLine(s, durs[s], 2.0+8.0/float64(s+2)))
		lr.SetTraceID(j.traceID(rank, s))
		lr.SetSpanID(j.spanID(rank, s, 0))
		lr.Attributes().PutInt("megatron.iteration", int64(iterationPlaceholder+s))
		j.putExtra(lr.Attributes())
	}
	return ld
}
