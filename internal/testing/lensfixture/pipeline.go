// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package lensfixture

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
)

// Pipeline is the forward_backward of a pipeline-parallel step: Stages
// stages, each holding a slice of the model's layers, run MicroBatches
// micro-batches with Megatron-LM's non-interleaved 1F1B schedule
// (forward_backward_pipelining_without_interleaving). Stage j first runs
// Stages-j-1 warm-up forwards, then alternates one forward and one
// backward, then runs the remaining backwards. Activations flow forward
// (stage j sends to j+1, megatron.p2p.send_forward / recv_forward) and
// gradients backward (send_backward / recv_backward); in the steady
// phase a stage sends and receives in one batched operation
// (send_forward_recv_backward, send_backward_recv_forward), which ends
// when the peer has posted the matching one. So a stage that stops
// blocks its neighbors, and they theirs: the later stages in their
// receives of forwards, the earlier ones in their receives of backwards.
type Pipeline struct {
	Stages, MicroBatches int
	// Forward and Backward are one micro-batch's compute on a stage;
	// Transfer is one point-to-point transfer.
	Forward, Backward, Transfer time.Duration
}

// DefaultPipeline is 4 stages of 8 micro-batches: a 216ms forward_backward.
var DefaultPipeline = Pipeline{Stages: 4, MicroBatches: 8, Forward: 6 * time.Millisecond, Backward: 12 * time.Millisecond, Transfer: time.Millisecond}

// Pipeline-parallel span names (besides RecvForward and SendForward).
const (
	RecvBackward = "megatron.p2p.recv_backward"
	SendBackward = "megatron.p2p.send_backward"
)

// PipelineStop is where a stage of one pipeline (a data-parallel replica)
// stops in a step: its schedule's operation Op (PipelineOps) starts and
// never ends, and nothing after it starts. Op 0 is a rank that stopped
// before the step (nothing of it ends); an operation that is a transfer is
// a link that stopped: neither end of it ever completes.
type PipelineStop struct {
	Stage, Op int
}

// pipeOp is one operation of a stage's schedule: a micro-batch's forward
// or backward compute, or a point-to-point operation of one or two
// transfers with one neighbor.
type pipeOp struct {
	compute    bool
	backward   bool // compute: a backward
	microbatch int
	xfers      []xfer
}

// xfer is one transfer as one side sees it: to or from stage peer, of a
// micro-batch's activation (forward) or gradient (backward).
type xfer struct {
	peer, microbatch int
	backward, send   bool
}

// other is the same transfer as the peer sees it.
func (x xfer) other(self int) xfer {
	return xfer{peer: self, microbatch: x.microbatch, backward: x.backward, send: !x.send}
}

func (x xfer) name() string {
	switch {
	case x.send && x.backward:
		return SendBackward
	case x.send:
		return SendForward
	case x.backward:
		return RecvBackward
	}
	return RecvForward
}

// schedule is stage j's operations in order.
func (p Pipeline) schedule(j int) []pipeOp {
	first, last := j == 0, j == p.Stages-1
	warmup := min(p.Stages-j-1, p.MicroBatches)
	steady := p.MicroBatches - warmup
	var ops []pipeOp
	comm := func(xs ...xfer) {
		var keep []xfer
		for _, x := range xs {
			if (x.peer < j && !first) || (x.peer > j && !last) {
				keep = append(keep, x)
			}
		}
		if len(keep) > 0 {
			ops = append(ops, pipeOp{xfers: keep})
		}
	}
	recvF := func(mb int) xfer { return xfer{peer: j - 1, microbatch: mb} }
	sendF := func(mb int) xfer { return xfer{peer: j + 1, microbatch: mb, send: true} }
	recvB := func(mb int) xfer { return xfer{peer: j + 1, microbatch: mb, backward: true} }
	sendB := func(mb int) xfer { return xfer{peer: j - 1, microbatch: mb, backward: true, send: true} }
	forward := func(mb int) { ops = append(ops, pipeOp{compute: true, microbatch: mb}) }
	backward := func(mb int) { ops = append(ops, pipeOp{compute: true, backward: true, microbatch: mb}) }
	for mb := range warmup {
		comm(recvF(mb))
		forward(mb)
		comm(sendF(mb))
	}
	if steady > 0 {
		comm(recvF(warmup))
	}
	for i := range steady {
		forward(warmup + i)
		comm(sendF(warmup+i), recvB(i))
		backward(i)
		if i == steady-1 {
			comm(sendB(i))
		} else {
			comm(sendB(i), recvF(warmup+i+1))
		}
	}
	for mb := steady; mb < p.MicroBatches; mb++ {
		comm(recvB(mb))
		backward(mb)
		comm(sendB(mb))
	}
	return ops
}

// PipelineOps is the number of operations of stage's schedule: the
// PipelineStop.Op values that stop it within the step.
func (p Pipeline) PipelineOps(stage int) int { return len(p.schedule(stage)) }

// Compute says whether operation op of stage's schedule is a compute (a
// micro-batch's forward or backward), not a transfer.
func (p Pipeline) Compute(stage, op int) bool { return p.schedule(stage)[op].compute }

// ForwardOp is the operation of stage's schedule that computes
// microbatch's forward (-1: none).
func (p Pipeline) ForwardOp(stage, microbatch int) int {
	return slices.IndexFunc(p.schedule(stage), func(op pipeOp) bool { return op.compute && !op.backward && op.microbatch == microbatch })
}

// Peers are the stages operation op of stage's schedule transfers with
// (none for a compute).
func (p Pipeline) Peers(stage, op int) []int {
	var peers []int
	for _, x := range p.schedule(stage)[op].xfers {
		if !slices.Contains(peers, x.peer) {
			peers = append(peers, x.peer)
		}
	}
	return peers
}

// PipeSpan is one span of a stage's forward_backward: a micro-batch's
// forward or backward, or one side of a transfer, as offsets from the
// forward_backward's start. Open spans never end (they are not exported).
type PipeSpan struct {
	Name       string
	Microbatch int
	From, To   time.Duration
	Open       bool
}

// StagePlan is what one stage does in the step's forward_backward.
type StagePlan struct {
	Spans []PipeSpan
	// Done says the stage ran its whole schedule, at End.
	Done bool
	End  time.Duration
}

// Simulate runs one step's forward_backward of one pipeline, every stage
// starting at 0, with stop (nil: none): the stage it names stops there, and
// every other stage runs until it waits for something that never comes.
func (p Pipeline) Simulate(stop *PipelineStop) []StagePlan {
	type stageState struct {
		ops    []pipeOp
		pc     int
		at     time.Duration // when the current operation was posted
		posted bool
		halted bool
	}
	st := make([]stageState, p.Stages)
	plans := make([]StagePlan, p.Stages)
	for j := range st {
		st[j].ops = p.schedule(j)
	}
	// done holds the completion time of every transfer completed, keyed by
	// the side that completed it.
	type key struct {
		stage int
		x     xfer
	}
	done := map[key]time.Duration{}
	stopped := func(j int) bool { return stop != nil && stop.Stage == j && st[j].pc == stop.Op }
	// matched says when transfer x of stage j can complete: its peer posted
	// the other side, or already completed it.
	matched := func(j int, x xfer) (time.Duration, bool) {
		if t, ok := done[key{x.peer, x.other(j)}]; ok {
			return t, true
		}
		peer := &st[x.peer]
		if peer.halted && stop != nil && stop.Stage == x.peer {
			// A stage that stopped in a transfer completes none of it.
			return 0, false
		}
		if peer.pc < len(peer.ops) && peer.posted && slices.Contains(peer.ops[peer.pc].xfers, x.other(j)) {
			return peer.at, true
		}
		return 0, false
	}
	for progress := true; progress; {
		progress = false
		for j := range st {
			s := &st[j]
			for !s.halted && s.pc < len(s.ops) {
				op := s.ops[s.pc]
				if stopped(j) {
					s.halted, s.posted = true, true
					for _, sp := range opSpans(op, s.at, 0) {
						sp.Open = true
						plans[j].Spans = append(plans[j].Spans, sp)
					}
					break
				}
				if op.compute {
					d := p.Forward
					if op.backward {
						d = p.Backward
					}
					plans[j].Spans = append(plans[j].Spans, opSpans(op, s.at, s.at+d)...)
					s.at += d
					s.pc++
					progress = true
					continue
				}
				s.posted = true
				end, all := s.at, true
				for _, x := range op.xfers {
					t, ok := matched(j, x)
					if !ok {
						all = false
						break
					}
					end = max(end, t)
				}
				if !all {
					break
				}
				end += p.Transfer
				for _, x := range op.xfers {
					if t, ok := done[key{x.peer, x.other(j)}]; ok {
						end = t // the peer completed it first: the same moment
					}
				}
				for _, x := range op.xfers {
					done[key{j, x}] = end
				}
				plans[j].Spans = append(plans[j].Spans, opSpans(op, s.at, end)...)
				s.at, s.posted = end, false
				s.pc++
				progress = true
			}
		}
	}
	for j := range st {
		s := &st[j]
		if s.pc == len(s.ops) {
			plans[j].Done, plans[j].End = true, s.at
			continue
		}
		if !s.halted {
			// Blocked: its posted operation stays open.
			for _, sp := range opSpans(s.ops[s.pc], s.at, 0) {
				sp.Open = true
				plans[j].Spans = append(plans[j].Spans, sp)
			}
		}
	}
	for j := range plans {
		slices.SortStableFunc(plans[j].Spans, func(a, b PipeSpan) int { return cmp.Compare(a.From, b.From) })
	}
	return plans
}

// opSpans are the spans of one operation from..to: a compute is one span,
// a point-to-point operation one span per transfer.
func opSpans(op pipeOp, from, to time.Duration) []PipeSpan {
	if op.compute {
		name := MicrobatchForward
		if op.backward {
			name = MicrobatchBack
		}
		return []PipeSpan{{Name: name, Microbatch: op.microbatch, From: from, To: to}}
	}
	spans := make([]PipeSpan, len(op.xfers))
	for i, x := range op.xfers {
		spans[i] = PipeSpan{Name: x.name(), Microbatch: x.microbatch, From: from, To: to}
	}
	return spans
}

// PipelineJob is a synchronous job with pipeline and data parallelism:
// Replicas copies (data-parallel ranks) of a pipeline of Pipeline.Stages
// stages, one rank per stage and copy (no tensor parallelism), numbered
// as Megatron-LM numbers them by default (tp-dp-pp: the pipeline stage
// varies slowest): rank = stage x Replicas + replica. Each stage's ranks
// reduce their gradients together (megatron.grad_sync.*) once every copy
// of the stage finished its forward_backward, and the optimizer step ends
// together on every rank: every rank's step ends at the same time.
type PipelineJob struct {
	// Run holds the ranks (PipelineRanks), the shape, the start, the
	// period and the step's GradSync and Optimizer; its Step's Compute and
	// MicroBatches are the Pipeline's business.
	Run      Run
	Pipeline Pipeline
	Replicas int
}

// PipelineRanks are the ranks of a job of stages x replicas ranks shaped
// like template, each sending the pipeline size as NeMo Lens does
// (nv.dl.topology.size.pp, or dl.pipeline_parallel.size with LegacyKeys).
func PipelineRanks(template Rank, stages, replicas int) []Rank {
	template.WorldSize = int64(stages * replicas)
	ranks := Fleet(template)
	for i := range ranks {
		key := attrkey.PipelineSize
		if ranks[i].LegacyKeys {
			key = attrkey.LegacyPipelineSize
		}
		var size any = int64(stages)
		if ranks[i].AsString {
			size = strconv.Itoa(stages)
		}
		ranks[i].Extra = append(slices.Clone(template.Extra), KeyValue{key, size})
	}
	return ranks
}

// StageOf is rank's pipeline stage, and ReplicaOf its copy of the pipeline.
func (j PipelineJob) StageOf(rank int64) int   { return int(rank) / j.Replicas }
func (j PipelineJob) ReplicaOf(rank int64) int { return int(rank) % j.Replicas }

// pipePlan is a plan that may stay open.
type pipePlan struct {
	Plan
	open bool
}

// stepPlans is the step of a rank of stage, in a step in which its copy
// of the pipeline ran as mine says, the same stage of every copy as
// stage says (its grad sync completes only if every copy of the stage
// finished its forward_backward), and a healthy one as healthy says; hung
// says some copy stopped, so that the optimizer step, which waits for
// every rank, never ends.
func (j PipelineJob) stepPlans(healthy []StagePlan, mine StagePlan, stageDone, hung bool) []pipePlan {
	step := j.Run.template()
	var slowest time.Duration
	for _, sp := range healthy {
		slowest = max(slowest, sp.End)
	}
	syncEnd := slowest + step.GradSync
	d := syncEnd + step.Optimizer
	if period := j.Run.period(); d >= period {
		panic(fmt.Sprintf("lensfixture: a pipeline step lasts %v, not less than the run's Period %v: raise Run.Period", d, period))
	}
	open := func(p Plan, o bool) pipePlan { return pipePlan{p, o} }
	plans := []pipePlan{
		open(Plan{Name: j.Run.stepName(), Parent: -1, From: 0, To: d}, hung),
		open(Plan{Name: ForwardBackward, Parent: 0, From: 0, To: mine.End}, !mine.Done),
	}
	for _, s := range mine.Spans {
		plans = append(plans, open(Plan{Name: s.Name, Parent: ForwardBackwardIndex, From: s.From, To: s.To}, s.Open))
	}
	if !mine.Done {
		return plans
	}
	start := mine.End + step.GradSync/3
	return append(plans,
		open(Plan{Name: GradSyncStart, Parent: 0, From: mine.End, To: start}, false),
		open(Plan{Name: GradSyncFinish, Parent: 0, From: start, To: syncEnd}, !stageDone),
		open(Plan{Name: Optimizer, Parent: 0, From: syncEnd, To: d}, hung),
	)
}

// Iteration is one batch holding every rank's step of a healthy
// iteration, a resource per rank.
func (j PipelineJob) Iteration(iteration int64) ptrace.Traces {
	healthy := j.Pipeline.Simulate(nil)
	td := ptrace.NewTraces()
	for _, rank := range j.Run.Ranks {
		stage := j.StageOf(rank.Rank)
		j.appendPlans(AppendResource(td, rank), rank, iteration, j.stepPlans(healthy, healthy[stage], true, false))
	}
	return td
}

// HungIteration is one batch holding what every rank ends of its step of
// iteration when the job hangs there because copy replica of the pipeline
// stops as stop says; every other rank runs until it waits for something
// that never comes.
func (j PipelineJob) HungIteration(iteration int64, replica int, stop PipelineStop) ptrace.Traces {
	healthy, hung := j.Pipeline.Simulate(nil), j.Pipeline.Simulate(&stop)
	td := ptrace.NewTraces()
	for _, rank := range j.Run.Ranks {
		stage := j.StageOf(rank.Rank)
		mine := healthy[stage]
		if j.ReplicaOf(rank.Rank) == replica {
			mine = hung[stage]
		}
		j.appendPlans(AppendResource(td, rank), rank, iteration, j.stepPlans(healthy, mine, hung[stage].Done, true))
	}
	return td
}

// appendPlans appends the ended plans in the order they end, with the
// attributes Megatron-LM puts on them: the iteration and the number of
// micro-batches on the step span, the pipeline stage on the step, its
// forward_backward, micro-batch and point-to-point spans.
func (j PipelineJob) appendPlans(dst ptrace.SpanSlice, rank Rank, iteration int64, plans []pipePlan) {
	bare := make([]Plan, len(plans))
	for i, p := range plans {
		bare[i] = p.Plan
	}
	start := j.Run.StepStart(iteration)
	trace := j.Run.TraceID(rank, iteration)
	stage := int64(j.StageOf(rank.Rank))
	for _, i := range ExportOrder(bare) {
		p := plans[i]
		if p.open {
			continue
		}
		parent := SpanID(KindStep, rank.Rank, iteration, p.Parent)
		if p.Parent < 0 {
			parent = SpanID(KindJob, rank.Rank, 0, TrainIndex)
			if j.Run.Shape.StepsAreRoots {
				parent = pcommon.SpanID{}
			}
		}
		s := dst.AppendEmpty()
		setSpan(s, p.Name, trace, SpanID(KindStep, rank.Rank, iteration, i), parent, start.Add(p.From), start.Add(p.To))
		attrs := s.Attributes()
		switch p.Name {
		case GradSyncStart, GradSyncFinish, Optimizer:
			continue
		case j.Run.stepName():
			attrs.PutInt(attrkey.MegatronIteration, iteration)
			attrs.PutInt(attrkey.MegatronNumMicrobatches, int64(j.Pipeline.MicroBatches))
		}
		attrs.PutInt(attrkey.PipelineRank, stage)
	}
}
