// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package lensfixture

import (
	"cmp"
	"slices"
	"time"
)

// Step is one rank's step of synchronous training. The rank computes
// (ForwardBackward) for Compute, of which RecvWait is spent waiting for its
// pipeline peer; it then starts the gradient all-reduce and waits in
// GradSyncFinish until the slowest rank of the step has computed too
// (Slowest) and the all-reduce took GradSync; then it runs the optimizer. So
// every rank's step lasts Slowest + GradSync + Optimizer and ends together;
// a slow rank shows longer compute, the others longer waits.
type Step struct {
	Compute, Slowest, GradSync, Optimizer time.Duration
	// RecvWait > 0 adds a RecvForward span at the start of ForwardBackward.
	RecvWait time.Duration
	// MicroBatches is the number of forward/backward pairs; 0 means 2.
	MicroBatches int
}

// Duration is the step's wall time, the same on every rank.
func (s Step) Duration() time.Duration { return s.slowest() + s.GradSync + s.Optimizer }

// Busy is what a straggler detector must measure: the step's time outside
// its wait spans (the pipeline receive and the gradient sync).
func (s Step) Busy() time.Duration { return s.Compute - s.RecvWait + s.Optimizer }

func (s Step) slowest() time.Duration { return max(s.Slowest, s.Compute) }

func (s Step) microBatches() int {
	if s.MicroBatches > 0 {
		return s.MicroBatches
	}
	return 2
}

// SpansPerStep is the number of spans of a step with m micro-batches, with
// or without a pipeline receive.
func SpansPerStep(m int, recv bool) int {
	n := 1 + 1 + 3*m + 3
	if recv {
		n++
	}
	return n
}

// Spans is the number of spans of the step.
func (s Step) Spans() int { return SpansPerStep(s.microBatches(), s.RecvWait > 0) }

// Plan is one span of a step: its name, its parent's index in the plan list
// (-1: the step span, whose parent is up to the shape) and its interval as
// offsets from the step's start.
type Plan struct {
	Name     string
	Parent   int
	From, To time.Duration
}

// ForwardBackwardIndex is ForwardBackward's place in Plans.
const ForwardBackwardIndex = 1

// Plans returns the step's spans, parents before children; span 0 is the
// step span, named stepName, span ForwardBackwardIndex its compute.
func (s Step) Plans(stepName string) []Plan {
	c, d := s.Compute, s.Duration()
	plans := []Plan{{stepName, -1, 0, d}, {ForwardBackward, 0, 0, c}}
	work := time.Duration(0)
	if s.RecvWait > 0 {
		plans = append(plans, Plan{RecvForward, 1, 0, s.RecvWait})
		work = s.RecvWait
	}
	m := s.microBatches()
	per := (c - work) / time.Duration(m)
	for mb := range m {
		base := work + time.Duration(mb)*per
		fwd := len(plans)
		plans = append(plans,
			Plan{MicrobatchForward, 1, base, base + per*4/10},
			Plan{LayerForward, fwd, base, base + per*3/10},
			Plan{MicrobatchBack, 1, base + per*4/10, base + per},
		)
	}
	syncEnd := s.slowest() + s.GradSync
	return append(plans,
		Plan{GradSyncStart, 0, c, c + s.GradSync/3},
		Plan{GradSyncFinish, 0, c + s.GradSync/3, syncEnd},
		Plan{Optimizer, 0, syncEnd, d},
	)
}

// ExportOrder returns the indexes of plans in the order the spans end, and
// so the order a rank exports them: by end time, children before their
// parents.
func ExportOrder(plans []Plan) []int {
	depth := make([]int, len(plans))
	for i, p := range plans {
		if p.Parent >= 0 {
			depth[i] = depth[p.Parent] + 1
		}
	}
	order := make([]int, len(plans))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(plans[a].To, plans[b].To), cmp.Compare(depth[b], depth[a]))
	})
	return order
}
