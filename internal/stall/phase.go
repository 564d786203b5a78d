// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stall // import "github.com/nemo-lens/otelcol-nemo/internal/stall"

import "strings"

// Phase is how far into a step a span's end shows a rank got, in Megatron's
// step order: forward, backward, the end of forward_backward, the
// gradient all-reduce started and finished, the optimizer, the step. Both
// span taxonomies name these spans alike; only the step span differs.
type Phase int

const (
	// PhaseNone: nothing of the step ended.
	PhaseNone Phase = iota
	// PhaseOther: a span of the step that says nothing of its order (data
	// loading, a log span).
	PhaseOther
	PhaseForward
	PhaseBackward
	PhaseComputeDone
	PhaseGradSyncStarted
	PhaseGradSyncDone
	PhaseOptimizer
	PhaseStep
)

// PhaseOf reads a span name's place in the step.
func PhaseOf(name string) Phase { return placeOf(name).phase }

// compute says whether a span is a micro-batch's forward or backward
// compute: a pipeline stage counts them (pipeline.go).
type compute uint8

const (
	notCompute compute = iota
	forwardCompute
	backwardCompute
)

// place is a span name's place in the step: its phase, whether it is a
// micro-batch's compute, and its name as a constant when it is one of
// Megatron's, so that a rank's state keeps no string of a request.
type place struct {
	phase   Phase
	compute compute
	name    string
}

// placeOf is a switch on exact names: it runs for every Megatron span a
// collector receives.
func placeOf(name string) place {
	switch name {
	case "megatron.forward_backward":
		return place{PhaseComputeDone, notCompute, "megatron.forward_backward"}
	case "megatron.grad_sync.start":
		return place{PhaseGradSyncStarted, notCompute, "megatron.grad_sync.start"}
	case "megatron.grad_sync.finish":
		return place{PhaseGradSyncDone, notCompute, "megatron.grad_sync.finish"}
	case "megatron.optimizer_step":
		return place{PhaseOptimizer, notCompute, "megatron.optimizer_step"}
	case "megatron.microbatch.backward":
		return place{PhaseBackward, backwardCompute, "megatron.microbatch.backward"}
	case "megatron.p2p.recv_backward":
		return place{PhaseBackward, notCompute, "megatron.p2p.recv_backward"}
	case "megatron.p2p.send_backward":
		return place{PhaseBackward, notCompute, "megatron.p2p.send_backward"}
	case "megatron.microbatch.forward":
		return place{PhaseForward, forwardCompute, "megatron.microbatch.forward"}
	case "megatron.p2p.recv_forward":
		return place{PhaseForward, notCompute, "megatron.p2p.recv_forward"}
	case "megatron.p2p.send_forward":
		return place{PhaseForward, notCompute, "megatron.p2p.send_forward"}
	case "megatron.pp.recv_forward.linked":
		return place{PhaseForward, notCompute, "megatron.pp.recv_forward.linked"}
	}
	if strings.HasPrefix(name, "megatron.layer.") {
		return place{PhaseForward, notCompute, name}
	}
	return place{PhaseOther, notCompute, name}
}

// String is the phase as a stall's message says it.
func (p Phase) String() string {
	return [...]string{"nothing", "a span", "forward", "backward", "forward and backward", "the gradient all-reduce's start", "the gradient all-reduce", "the optimizer step", "the step"}[p]
}
