// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package steps // import "github.com/nemo-lens/otelcol-nemo/internal/steps"

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
	"github.com/nemo-lens/otelcol-nemo/internal/stepsummary"
)

// Listener is a user of an Engine: its policy, in the spirit of
// tail_sampling's policy evaluator. The engine walks the spans, places them
// in steps, keeps and scores the steps, and calls the listener; the
// listener decides what to keep or emit. Every method but Send is called
// with the engine's lock held: it must not block or call into the engine,
// except where a method says so. P is what the listener keeps of a span
// that waits for its step span; D is what it remembers of a decided step.
//
// Embed Base for the methods a listener has no use for.
type Listener[P, D any] interface {
	// Arrived is one span of an identified rank, in the order of its batch,
	// before it is placed: step says whether it is the rank's step span
	// (and of which iteration). Listeners that follow a rank's progress
	// span by span (the stall detector) read it here.
	Arrived(r *Resource, s ptrace.Span, step StepSpan)

	// Placed says where a span of a resource walked with keep (see
	// Batch.Walk) belongs, while its batch is being walked.
	Placed(r *Resource, s SpanRef, at Placement[D])

	// Wait is what the listener keeps of a span of a resource walked with
	// keep whose step span has not come: called once the resource's other
	// spans are placed.
	Wait(r *Resource, s SpanRef) P

	// Resolved says where a span that waited belongs once its step span
	// came (a later batch), or that it waited in vain (KindExpired).
	Resolved(rank Rank, p P, at Placement[D])

	// Decided is a step decided, with every rank that reported it, scored.
	// The listener may remember what it decided in *d.Value: a rank that
	// reports after the decision reopens the step, and its late spans find
	// the value in Placement.Decided. It may call Engine.TakeWaiting.
	Decided(d *Decision[D])

	// Tick is the engine's ticker (final: the collector stops), after the
	// due steps were decided and the spans that waited too long expired:
	// the listener judges what it judges over time and collects what it
	// sends.
	Tick(now time.Time, final bool)

	// Send passes on what the listener collected, and counts st, the
	// engine's work since the last Send; it runs without the engine's lock,
	// so that a slow consumer does not hold up the batches.
	Send(st *Stats, final bool) error
}

// Base has no-op methods for a Listener to embed.
type Base[P, D any] struct{}

func (Base[P, D]) Arrived(*Resource, ptrace.Span, StepSpan) {}
func (Base[P, D]) Placed(*Resource, SpanRef, Placement[D])  {}
func (Base[P, D]) Resolved(Rank, P, Placement[D])           {}
func (Base[P, D]) Decided(*Decision[D])                     {}
func (Base[P, D]) Tick(time.Time, bool)                     {}
func (Base[P, D]) Send(*Stats, bool) error                  { return nil }

func (Base[P, D]) Wait(*Resource, SpanRef) P {
	var zero P
	return zero
}

// Resource is the resource being walked, as its listener sees it.
type Resource struct {
	Identity
	// Seq numbers the resources an engine walks, so that a listener can
	// look up what it keeps of a rank once per resource, at its first span.
	Seq uint64
	// Attrs are the resource's attributes.
	Attrs pcommon.Map
	// Arrival is the engine's time of the batch, At the wall clock's.
	Arrival time.Duration
	At      time.Time
}

// StepSpan says what the engine made of a span as it arrived: a usable
// step span of Iteration, or not (Is false: any other span, or a step span
// without a usable iteration, which is placed like any other span).
//
// A span of a summary scope (internal/stepsummary: a rank the agent in
// front of this collector summarized) arrives as the span it stands for: a
// step summary as its step span, a phase envelope as its span outside the
// steps, and a progress beat as the latest span the rank ended; Summary is
// then what the summary says (nil for a span of the rank's own).
type StepSpan struct {
	Is        bool
	Iteration int64
	Summary   *stepsummary.Item
}

// SpanRef is span number Index (counting scope by scope, in order) of the
// resource walked, found in its scope number Scope.
type SpanRef struct {
	Span         ptrace.Span
	Index, Scope int
}

// Kind says where a span belongs.
type Kind uint8

const (
	// KindStep: the rank's step span of Iteration.
	KindStep Kind = iota + 1
	// KindCompute: a span within the rank's step of Iteration, not a wait.
	KindCompute
	// KindWait: a wait span within the rank's step of Iteration.
	KindWait
	// KindOutside: in no step of the rank (a job span, model set-up, a
	// checkpoint, an evaluation).
	KindOutside
	// KindExpired: the span waited span_wait for its step span in vain, or
	// was given up to keep the engine within its budget, or the collector
	// stops.
	KindExpired
)

// Placement is where a span belongs.
type Placement[D any] struct {
	Kind Kind
	// Iteration is the step's, with KindStep, KindCompute and KindWait.
	Iteration int64
	// Open says the step is open: it will be decided (Decided) later.
	// Decided is the listener's value of the step's decision when the step
	// was decided before the span came (and, when Open, reopened by a late
	// rank since) and the engine still remembers it; nil otherwise.
	Open    bool
	Decided *D
	// Expiry says why, with KindExpired.
	Expiry Expiry
}

// InStep says the span belongs to a step.
func (p Placement[D]) InStep() bool { return p.Kind >= KindStep && p.Kind <= KindWait }

// Decision is a decided step.
type Decision[D any] struct {
	Step  Step
	Cause Cause
	// Ranks are the ranks decided now, by rank, with their step spans,
	// waits and scores: every rank that reported, or, when the step was
	// reopened, the ranks that reported since its first decision.
	Ranks []RankStep
	// Reopened says a rank reported after the step's first decision.
	Reopened bool
	// Reported counts the ranks that reported the step, its earlier
	// decisions' included; WorldSize is the largest world size they sent
	// (0: none did).
	Reported, WorldSize int64
	// Fastest is the step's fastest busy time, its earlier decisions'
	// ranks included (0: none known).
	Fastest int64
	// Value is the listener's value of the step: zero at its first
	// decision; what the listener set then, when reopened.
	Value *D
}

// Missing says how many ranks of the world had not reported the step.
func (d *Decision[D]) Missing() int64 { return max(d.WorldSize-d.Reported, 0) }

// RankStep is one rank's step: its step span and waits, and its scores
// (Score.Rank is the rank); TraceID and SpanID are its step span's.
type RankStep struct {
	stepbusy.StepTime
	Score   stepbusy.Score
	TraceID pcommon.TraceID
	SpanID  pcommon.SpanID
}
