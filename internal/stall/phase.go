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

// PhaseOf reads a span name's place in the step (a switch on exact names:
// it runs for every Megatron span a collector receives).
func PhaseOf(name string) Phase {
	switch name {
	case "megatron.forward_backward":
		return PhaseComputeDone
	case "megatron.grad_sync.start":
		return PhaseGradSyncStarted
	case "megatron.grad_sync.finish":
		return PhaseGradSyncDone
	case "megatron.optimizer_step":
		return PhaseOptimizer
	case "megatron.microbatch.backward", "megatron.p2p.recv_backward", "megatron.p2p.send_backward":
		return PhaseBackward
	case "megatron.microbatch.forward", "megatron.p2p.recv_forward", "megatron.p2p.send_forward", "megatron.pp.recv_forward.linked":
		return PhaseForward
	}
	if strings.HasPrefix(name, "megatron.layer.") {
		return PhaseForward
	}
	return PhaseOther
}

// String is the phase as a stall's message says it.
func (p Phase) String() string {
	return [...]string{"nothing", "a span", "forward", "backward", "forward and backward", "the gradient all-reduce's start", "the gradient all-reduce", "the optimizer step", "the step"}[p]
}
