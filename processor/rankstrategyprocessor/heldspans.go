// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor"

import (
	"math"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// rankID is one rank of one run and group. owner hashes group and rank.
type rankID struct {
	owner uint64
	group uint64
	rank  int64
}

// heldSpan is a span of a dropped rank that the buffer holds, in place in
// its chunk (steps.Chunk: the resource moved out of its batch whole).
type heldSpan = steps.Held[rankID]

// pendingSpan is a span of a rank on its way to its step: placed at once,
// or waiting in its rank's state for a step span that covers its start.
type pendingSpan struct {
	// held is the span when the buffer holds it: a dropped rank's, not
	// passed on already. Its Chunk is nil otherwise: a kept rank's span, or
	// one keep_errors passed on, which only gives its times to busy times.
	held heldSpan
	// wait marks a wait span, whose interval iv counts in its rank's busy
	// time; for a step span iv is the step's.
	wait bool
	iv   stepbusy.Interval
	// dropped marks a span of a rank the strategy drops.
	dropped bool
}

// rankState is a rank's spans that no step span seen so far places, in
// arrival order. It outlives them by a span_wait, so that a rank sending
// every few seconds reuses it.
type rankState struct {
	id       rankID
	pending  steps.Waiting[pendingSpan]
	lastSeen time.Duration
}

// rankStep is one rank's part of an open step.
type rankStep struct {
	owner uint64
	// StepTime's Start and End are the step span's, once reported; its wait
	// spans arrive before or after it.
	stepbusy.StepTime
	reported bool
	// dropped marks a rank the strategy drops: only those can be kept as
	// stragglers.
	dropped bool
	held    []heldSpan
}

// openStep is a step waiting for its decision, in the table of open steps.
type openStep = steps.Open[steps.Step, stepRanks]

// stepRanks are the ranks of an open step.
type stepRanks struct {
	// reported counts the ranks whose step span was seen.
	reported int64
	// observed counts the rank entries and wait intervals of the step,
	// bounded by max_buffered_spans.
	observed int
	ranks    map[int64]*rankStep
	// prior is the decision of a step reopened for a rank that reported
	// after it: the ranks it kept stay kept, the others stay dropped.
	prior *stepDecision
}

func (sr *stepRanks) rank(owner uint64, rank int64) (*rankStep, bool) {
	if rs := sr.ranks[rank]; rs != nil {
		return rs, false
	}
	rs := &rankStep{owner: owner}
	sr.ranks[rank] = rs
	sr.observed++
	return rs, true
}

// spanInterval is the span's [start, end) in ns, clamped to int64.
func spanInterval(s ptrace.Span) stepbusy.Interval {
	return stepbusy.Interval{Start: clampNanos(uint64(s.StartTimestamp())), End: clampNanos(uint64(s.EndTimestamp()))}
}

func clampNanos(ns uint64) int64 { return int64(min(ns, math.MaxInt64)) }
