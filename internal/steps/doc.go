// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package steps is the step engine that rank_strategy's straggler retention,
// step_sampling and the nemo_steps connector share: what a step is (the step
// settings, squashed into each component's config), who sent a span (a
// rank's identity), where a span belongs (Where and Resolve, on the rank's
// step spans in a stepbusy.Timeline) and when a step is complete (the table
// of open steps and the FIFO of decided ones). It reads pdata; the
// arithmetic of busy times and scores is internal/stepbusy's.
//
// The components keep only their policy: which held ranks to keep, which
// steps to sample, which points to emit.
package steps // import "github.com/nemo-lens/otelcol-nemo/internal/steps"
