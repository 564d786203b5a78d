// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepbusy

import "github.com/nemo-lens/otelcol-nemo/internal/attrkey"

// Defaults of the step settings (step_span_names, iteration_attribute,
// wait_spans) that rank_strategy's stragglers block, the nemo_steps connector
// and step_sampling share, so that they all find the same steps in the same
// spans. The lists are returned fresh on each call: a component's config owns
// its slice.

// DefaultIterationAttribute is the step span attribute holding Megatron-LM's
// iteration number.
const DefaultIterationAttribute = attrkey.MegatronIteration

// DefaultStepSpanNames are Megatron-LM's per-iteration spans in its first
// and its newer span taxonomy.
func DefaultStepSpanNames() []string {
	return []string{attrkey.MegatronTrainStep, attrkey.MegatronTrainIteration}
}

// DefaultWaitSpans are Megatron-LM's communication spans in which a rank
// waits for its peers: the data-parallel gradient sync (reduce-scatter or
// all-reduce, directly under the step) and the pipeline-parallel receives
// (under forward_backward). Sends are not waits: they return once the data
// is handed over.
func DefaultWaitSpans() []string {
	return []string{"megatron.grad_sync.*", "megatron.p2p.recv_*", "megatron.pp.recv_*"}
}
