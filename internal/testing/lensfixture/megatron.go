// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package lensfixture

import "github.com/nemo-lens/otelcol-nemo/internal/attrkey"

// Megatron-LM's span names (both taxonomies name the step span differently
// and agree on the rest).
const (
	// Pretrain is the root of a rank's job trace, lasting the whole run.
	Pretrain = "megatron.pretrain"
	// ModelInit is the model set-up under Pretrain, before the first step.
	ModelInit = "megatron.model_init"
	// Train is the training loop under Pretrain, the step spans' parent
	// when steps are not their own trace roots.
	Train = "megatron.train"
	// SaveCheckpoint is a checkpoint under Train, between two steps.
	SaveCheckpoint = "megatron.save_checkpoint"
	// LoadCheckpoint is loading a checkpoint under Pretrain, before the
	// first step.
	LoadCheckpoint = "megatron.load_checkpoint"
	// Evaluate is an evaluation under Train, between two steps.
	Evaluate = "megatron.evaluate"

	ForwardBackward   = "megatron.forward_backward"
	MicrobatchForward = "megatron.microbatch.forward"
	LayerForward      = "megatron.layer.forward"
	MicrobatchBack    = "megatron.microbatch.backward"
	// RecvForward is a pipeline-parallel receive: the rank waits for its
	// previous stage.
	RecvForward = "megatron.p2p.recv_forward"
	// SendForward is a pipeline-parallel send: not a wait, it returns once
	// the data is handed over.
	SendForward = "megatron.p2p.send_forward"
	// GradSyncStart and GradSyncFinish are the data-parallel gradient
	// all-reduce: a fast rank waits in GradSyncFinish for the slowest.
	GradSyncStart  = "megatron.grad_sync.start"
	GradSyncFinish = "megatron.grad_sync.finish"
	Optimizer      = "megatron.optimizer_step"
)

// Shape is one way a job's step spans arrive: named in either taxonomy, and
// either children of the rank's run-long Train span (one trace per rank) or
// each the root of its own trace.
type Shape struct {
	// StepName is attrkey.MegatronTrainStep or attrkey.MegatronTrainIteration.
	StepName string
	// StepsAreRoots makes every step span the root of its own trace.
	StepsAreRoots bool
}

// String names the shape for subtests: "train_step/in_job", ...
func (s Shape) String() string {
	where := "in_job"
	if s.StepsAreRoots {
		where = "own_root"
	}
	name := "train_step"
	if s.StepName == attrkey.MegatronTrainIteration {
		name = "train.iteration"
	}
	return name + "/" + where
}

// Shapes are the four shapes every step-reading component must accept.
var Shapes = []Shape{
	{StepName: attrkey.MegatronTrainStep},
	{StepName: attrkey.MegatronTrainIteration},
	{StepName: attrkey.MegatronTrainStep, StepsAreRoots: true},
	{StepName: attrkey.MegatronTrainIteration, StepsAreRoots: true},
}
