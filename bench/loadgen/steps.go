// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
)

// A step of any duration is the fixture's default step stretched to it:
// these are its parts as shares of the step (70% compute, 15% gradient
// sync, 15% optimizer).
var (
	// fullCompute is the share of a step in megatron.forward_backward for a
	// rank nobody waits for.
	fullCompute   = shareOfStep(lensfixture.DefaultStep.Compute)
	gradSyncShare = shareOfStep(lensfixture.DefaultStep.GradSync)
)

// recvShare is the share of the step a rank computing for fullCompute waits
// for its pipeline peer (megatron.p2p.recv_forward); it scales with the
// compute, and the send to the next stage lasts as long.
const recvShare = 0.02

func shareOfStep(d time.Duration) float64 {
	return float64(d) / float64(lensfixture.DefaultStep.Duration())
}

// Loadgen's own spans of a step, beyond the fixture's tree: a pipeline
// receive with a link to the previous stage's send, and that send.
const (
	recvForwardLinked = "megatron.pp.recv_forward.linked"
	sendForward       = lensfixture.SendForward
)

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

// stepOf is rank's step lasting d, in the fixture's synchronous model: the
// rank computes for its computeShare of d and waits in grad sync until the
// slowest rank (fullCompute of d) is done too.
func (j job) stepOf(rank int, d time.Duration) lensfixture.Step {
	part := func(f float64) time.Duration { return time.Duration(f * float64(d)) }
	compute, slowest, gradSync := part(j.computeShare(rank)), part(fullCompute), part(gradSyncShare)
	return lensfixture.Step{
		Compute: compute, Slowest: slowest, GradSync: gradSync,
		Optimizer:    d - slowest - gradSync, // the step lasts d exactly
		RecvWait:     time.Duration(float64(compute) * recvShare / fullCompute),
		MicroBatches: j.microbatches,
	}
}

// stepPlans is the megatron.train_step subtree of step, 8+3m spans: the
// fixture's tree, with its pipeline receive, then loadgen's two pipeline
// spans under megatron.forward_backward: the linked receive, alongside the
// fixture's, and the send over the end of the compute.
func stepPlans(step lensfixture.Step) []lensfixture.Plan {
	plans, fb := step.Plans(attrkey.MegatronTrainStep), lensfixture.ForwardBackwardIndex
	return append(plans,
		lensfixture.Plan{Name: recvForwardLinked, Parent: fb, From: 0, To: step.RecvWait},
		lensfixture.Plan{Name: sendForward, Parent: fb, From: step.Compute - step.RecvWait, To: step.Compute},
	)
}

// spansPerStep is the size of one megatron.train_step subtree.
func (j job) spansPerStep() int { return lensfixture.SpansPerStep(j.microbatches, true) + 2 }

// sendForwardIndex is the index of megatron.p2p.send_forward in stepPlans,
// the span a pipeline peer's megatron.pp.recv_forward.linked links to.
func sendForwardIndex(m int) int { return lensfixture.SpansPerStep(m, true) + 1 }

// traces is rank's template: its resource and its steps, each span in the
// order of stepPlans (parents first).
func (j job) traces(rank int, ref int64) ptrace.Traces {
	td := ptrace.NewTraces()
	spans := lensfixture.AppendResource(td, j.rankOf(rank))
	starts, durs := j.stepStarts(rank, ref)
	spans.EnsureCapacity(j.spansPerStep() * j.stepsPerRequest)
	for s := range j.stepsPerRequest {
		microbatch := -1
		for i, p := range stepPlans(j.stepOf(rank, durs[s])) {
			sp := spans.AppendEmpty()
			sp.SetTraceID(j.traceID(rank, s))
			sp.SetSpanID(j.spanID(rank, s, i))
			switch {
			case p.Parent >= 0:
				sp.SetParentSpanID(j.spanID(rank, s, p.Parent))
			case j.traceScope != "step":
				sp.SetParentSpanID(j.trainSpanID(rank))
			}
			sp.SetName(p.Name)
			sp.SetKind(ptrace.SpanKindInternal)
			sp.SetStartTimestamp(pcommon.Timestamp(starts[s] + int64(p.From)))
			sp.SetEndTimestamp(pcommon.Timestamp(starts[s] + int64(p.To)))
			if p.Name == lensfixture.MicrobatchForward {
				microbatch++ // its layer and its backward follow it
			}
			j.putSpanAttributes(sp, rank, s, microbatch)
			j.putExtra(sp.Attributes())
		}
	}
	return td
}

// putSpanAttributes sets what Megatron-LM puts on span sp of rank's step s.
func (j job) putSpanAttributes(sp ptrace.Span, rank, s, microbatch int) {
	tpRank, dpRank, ppRank, dp := j.topology(rank)
	a := sp.Attributes()
	switch sp.Name() {
	case attrkey.MegatronTrainStep:
		a.PutInt(attrkey.MegatronIteration, int64(iterationPlaceholder+s))
		a.PutInt("megatron.num_microbatches", int64(j.microbatches))
		a.PutDouble("megatron.loss", lensfixture.Loss(int64(s)))
		a.PutDouble("megatron.grad_norm", 1.0+float64(j.hash(9, uint64(rank), uint64(s))%500)/1000)
		a.PutBool("megatron.update_successful", true)
		a.PutDouble("megatron.learning_rate", 3e-4)
		a.PutInt("megatron.global_batch_size", 1024)
		a.PutInt("megatron.seq_length", 4096)
		a.PutInt("megatron.consumed_samples", int64(1024*(s+1)))
		a.PutInt("dl.pipeline_parallel.rank", int64(ppRank))
		a.PutInt("dl.tensor_parallel.rank", int64(tpRank))
		a.PutInt("dl.data_parallel.rank", int64(dpRank))
	case lensfixture.ForwardBackward:
		a.PutInt("megatron.num_microbatches", int64(j.microbatches))
		a.PutInt("dl.pipeline_parallel.rank", int64(ppRank))
		a.PutBool("megatron.forward_only", false)
	case lensfixture.MicrobatchForward, lensfixture.MicrobatchBack:
		a.PutInt("megatron.microbatch_id", int64(microbatch))
		a.PutInt("dl.pipeline_parallel.rank", int64(ppRank))
	case lensfixture.LayerForward:
		a.PutInt("megatron.microbatch_id", int64(microbatch))
		a.PutInt("megatron.layer.number", int64(ppRank*32))
	case lensfixture.RecvForward, sendForward, recvForwardLinked:
		a.PutInt("dl.pipeline_parallel.rank", int64(ppRank))
		a.PutStr("megatron.p2p.tensor_shape", "[4096, 1, 8192]")
		a.PutInt("megatron.p2p.bytes", 4096*8192*2)
		if sp.Name() == recvForwardLinked && ppRank > 0 {
			peer := rank - j.tp*dp
			link := sp.Links().AppendEmpty()
			link.SetTraceID(j.traceID(peer, s))
			link.SetSpanID(j.spanID(peer, s, sendForwardIndex(j.microbatches)))
			link.Attributes().PutInt("dl.pipeline_parallel.rank", int64(ppRank-1))
		}
	case lensfixture.GradSyncStart, lensfixture.GradSyncFinish:
		a.PutInt("megatron.grad_sync.buckets", 40)
		a.PutInt("dl.data_parallel.size", int64(dp))
	case lensfixture.Optimizer:
		a.PutBool("megatron.update_successful", true)
		a.PutDouble("megatron.grad_norm", 1.25)
		a.PutDouble("megatron.learning_rate", 3e-4)
	}
}
