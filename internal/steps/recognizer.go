// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package steps // import "github.com/nemo-lens/otelcol-nemo/internal/steps"

import (
	"fmt"
	"math"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
)

// Recognizer tells step spans and wait spans from the others and reads a
// step span's iteration.
type Recognizer struct {
	names   []string
	iterKey string
	waits   Patterns
}

// NewRecognizer recognizes the step spans of spans and the wait spans of
// waitSpans (none: no span is a wait).
func NewRecognizer(spans Spans, waitSpans []string) (Recognizer, error) {
	waits, err := ParsePatterns(waitSpans)
	if err != nil {
		return Recognizer{}, fmt.Errorf("wait_spans: %w", err)
	}
	return Recognizer{names: slices.Clone(spans.StepSpanNames), iterKey: spans.IterationAttribute, waits: waits}, nil
}

// IsStep reports whether a span of that name is a step span.
func (r *Recognizer) IsStep(name string) bool { return slices.Contains(r.names, name) }

// IsWait reports whether a span of that name is a wait span.
func (r *Recognizer) IsWait(name string) bool { return r.waits.Match(name) }

// Iteration is the step span's iteration; false when it has none usable.
func (r *Recognizer) Iteration(s ptrace.Span) (int64, bool) {
	v, ok := s.Attributes().Get(r.iterKey)
	if !ok {
		return 0, false
	}
	return rankattr.Parse(v)
}

// StepSpanNames and IterationAttribute are the settings, for messages.
func (r *Recognizer) StepSpanNames() []string    { return r.names }
func (r *Recognizer) IterationAttribute() string { return r.iterKey }

// Nanos is a timestamp in Unix ns, clamped to int64: the one way every
// step component turns a span's times into numbers.
func Nanos(ts pcommon.Timestamp) int64 { return int64(min(uint64(ts), math.MaxInt64)) }

// IntervalOf is the span's [start, end) in Unix ns.
func IntervalOf(s ptrace.Span) stepbusy.Interval {
	return stepbusy.Interval{Start: Nanos(s.StartTimestamp()), End: Nanos(s.EndTimestamp())}
}
