// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package steps // import "github.com/nemo-lens/otelcol-nemo/internal/steps"

import (
	"fmt"
	"math"
	"slices"
	"time"

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
	waits   stepbusy.Patterns
}

// NewRecognizer recognizes the step spans of spans and the wait spans of
// waitSpans (none: no span is a wait).
func NewRecognizer(spans Spans, waitSpans []string) (Recognizer, error) {
	waits, err := stepbusy.ParsePatterns(waitSpans)
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

// Nanos is a timestamp in ns, clamped to int64.
func Nanos(ts pcommon.Timestamp) int64 { return int64(min(uint64(ts), math.MaxInt64)) }

// Where ties a span that is not a step span to its rank's step: a trace root
// (a job span) belongs to no step; any other span to the step span of its
// rank that covers its start, Outside every step, or Unknown yet.
func Where(r *stepbusy.RankSteps, s ptrace.Span) (int64, stepbusy.Place) {
	if s.ParentSpanID().IsEmpty() {
		return 0, stepbusy.Outside
	}
	return r.Place(Nanos(s.StartTimestamp()))
}

// Waiting are a rank's spans (or what a component keeps of them) that no
// step span seen so far places, oldest first: their step span, which ends
// after them, has not arrived yet.
type Waiting[P any] struct {
	items []waitingItem[P]
}

type waitingItem[P any] struct {
	item    P
	start   int64
	arrived time.Duration
}

// Len is the number of items waiting.
func (w *Waiting[P]) Len() int { return len(w.items) }

// Add has an item starting at start wait for its step span, forgetting the
// ones that arrived before expiredBefore and, over limit, the oldest. It
// returns how many were forgotten.
func (w *Waiting[P]) Add(item P, start int64, arrived, expiredBefore time.Duration, limit int) int {
	drop := 0
	for drop < len(w.items) && (w.items[drop].arrived < expiredBefore || len(w.items)-drop >= limit) {
		drop++
	}
	if drop > 0 {
		w.items = slices.Delete(w.items, 0, drop)
	}
	w.items = append(w.items, waitingItem[P]{item: item, start: start, arrived: arrived})
	return drop
}

// Placed is a waiting item that a new step span placed.
type Placed[P any] struct {
	Item      P
	Iteration int64
	// Where is InStep (in Iteration) or Outside.
	Where stepbusy.Place
}

// Resolve places the waiting items again, after a new step span of the rank
// whose timeline is r:
// those InStep or Outside now stop waiting and are appended to placed; the
// ones that arrived before expiredBefore are forgotten. It returns placed
// and how many were forgotten. placed is the caller's scratch space, so that
// resolving does not allocate.
func Resolve[P any](r *stepbusy.RankSteps, w *Waiting[P], expiredBefore time.Duration, placed []Placed[P]) ([]Placed[P], int) {
	expired := 0
	kept := w.items[:0]
	for _, it := range w.items {
		if it.arrived < expiredBefore {
			expired++
			continue
		}
		iteration, where := r.Place(it.start)
		if where == stepbusy.Unknown {
			kept = append(kept, it)
			continue
		}
		placed = append(placed, Placed[P]{Item: it.item, Iteration: iteration, Where: where})
	}
	clear(w.items[len(kept):])
	w.items = kept
	return placed, expired
}

// RemoveIf removes the items remove says, in arrival order, and returns how
// many it removed; remove may keep what it removes (emit it, drop it).
func (w *Waiting[P]) RemoveIf(remove func(item P, start int64, arrived time.Duration) bool) int {
	kept := w.items[:0]
	for _, it := range w.items {
		if !remove(it.item, it.start, it.arrived) {
			kept = append(kept, it)
		}
	}
	n := len(w.items) - len(kept)
	clear(w.items[len(kept):])
	w.items = kept
	return n
}

// Oldest is when the oldest item arrived; false when none waits.
func (w *Waiting[P]) Oldest() (time.Duration, bool) {
	if len(w.items) == 0 {
		return 0, false
	}
	return w.items[0].arrived, true
}

// Clear forgets every waiting item and returns how many there were.
func (w *Waiting[P]) Clear() int {
	n := len(w.items)
	w.items = nil
	return n
}
