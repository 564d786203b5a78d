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

// heldChunk is one resource's spans from one batch, moved out of the batch
// whole (no copy). Its spans are referenced in place and leave it only when
// they are passed on. It is counted against max_buffered_spans, all its
// spans, until none of them waits any more; then it is garbage.
type heldChunk struct {
	rs      ptrace.ResourceSpans
	arrival time.Duration
	spans   int
	// waiting counts the references still held (pending or in an open
	// step), plus one while the batch that brought the chunk is placed.
	waiting int
	// observed marks a skeleton of a kept rank's spans (ids, names and
	// timestamps only): its spans passed through untouched and are here only
	// to tie wait spans to steps. It does not count as held in the metric.
	observed bool
}

// spanRef is one held span.
type spanRef struct {
	chunk *heldChunk
	span  ptrace.Span
	scope int32
	// ghost marks a span that has been passed on already (keep_errors kept
	// it, or it belongs to a kept rank): it ties its children to its step
	// and gives its times to the busy time, but is never passed on again.
	ghost bool
}

// rankState is a rank's spans not yet tied to a step, in arrival order. It
// outlives them by a span_wait, so that a rank sending every few seconds
// reuses it.
type rankState struct {
	id         rankID
	unresolved []spanRef
	lastSeen   time.Duration
}

// rankStep is one rank's part of an open step.
type rankStep struct {
	owner uint64
	// start and end are the step span's timestamps (ns), once reported.
	start, end int64
	reported   bool
	// dropped marks a rank the strategy drops: only those can be kept as
	// stragglers.
	dropped bool
	waits   []stepbusy.Interval
	held    []spanRef
}

func (rs *rankStep) busy() int64 {
	if !rs.reported {
		return -1
	}
	return stepbusy.Busy(rs.start, rs.end, rs.waits)
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

// skeletonOf copies into dst what tying a kept rank's wait spans to their
// steps needs of rs: ids, names, timestamps and, on step spans, the
// iteration. It is much cheaper than a full copy.
func skeletonOf(rs, dst ptrace.ResourceSpans, isStep func(string) bool, iterKey string) int {
	n := 0
	out := dst.ScopeSpans().AppendEmpty().Spans()
	sss := rs.ScopeSpans()
	for i := 0; i < sss.Len(); i++ {
		spans := sss.At(i).Spans()
		out.EnsureCapacity(out.Len() + spans.Len())
		for j := 0; j < spans.Len(); j++ {
			s := spans.At(j)
			c := out.AppendEmpty()
			c.SetTraceID(s.TraceID())
			c.SetSpanID(s.SpanID())
			c.SetParentSpanID(s.ParentSpanID())
			c.SetName(s.Name())
			c.SetStartTimestamp(s.StartTimestamp())
			c.SetEndTimestamp(s.EndTimestamp())
			if isStep(s.Name()) {
				if v, ok := s.Attributes().Get(iterKey); ok {
					v.CopyTo(c.Attributes().PutEmpty(iterKey))
				}
			}
			n++
		}
	}
	return n
}
