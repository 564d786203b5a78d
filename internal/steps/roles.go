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

// An engine's user plays one of two roles, in the spirit of tail_sampling's
// policy evaluator: the engine walks the spans, places them in steps, keeps
// and scores the steps, and tells its user; the user keeps only its policy.
//
//   - An Observer follows the steps: every span as it arrives and every
//     step decided. It holds no span (nemo_steps: step metrics, stalls,
//     goodput). Five methods.
//   - A Holder is an Observer that also holds spans until it knows their
//     step (rank_strategy's straggler retention, step_sampling): the engine
//     moves a resource it keeps out of its batch (a Chunk) and tells it
//     where each held span belongs, at once or once its step span came.
//     Two methods more.
//
// Every method but Send is called with the engine's lock held: it must not
// block or call into the engine, except where a method says so. D is what
// the user remembers of a decided step.
type Observer[D any] interface {
	// Resource is the resource about to be walked, called once before its
	// spans: what the user looks up once per resource (its run, its rank,
	// the rank's process) goes here.
	Resource(r *Resource)

	// Arrived is one span of the resource, in the order of its batch,
	// before it is placed: step says whether it is the rank's step span
	// (and of which iteration). Users that follow a rank's progress span
	// by span (the stall detector) read it here.
	Arrived(r *Resource, s ptrace.Span, step StepSpan)

	// Decided is a step decided, with every rank that reported it, scored.
	// The user may remember what it decided in *d.Value: a rank that
	// reports after the decision reopens the step, and its late spans find
	// the value in Placement.Decided. A Holder may call Engine.TakeWaiting.
	Decided(d *Decision[D])

	// Tick is the engine's ticker (final: the collector stops), after the
	// due steps were decided and the spans that waited too long expired:
	// the user judges what it judges over time and collects what it sends.
	Tick(now time.Time, final bool)

	// Send passes on what the user collected, and counts st, the engine's
	// work since the last Send (for a holder, the engine has just sent what
	// it passed on with the Output: st counts it); it runs without the
	// engine's lock, so that a slow consumer does not hold up the batches.
	Send(st *Stats, final bool) error
}

// Holder is an Observer that holds spans: the resources it walks with
// Batch.Hold or Batch.Watch are moved out of their batch into a Chunk (at
// once, or once one of their spans waits for its step span) and their spans
// held there until the holder passes them on (Output.Add) or lets them go
// (Held.Release). A span waiting for its step span is held by the engine
// meanwhile.
type Holder[D any] interface {
	Observer[D]

	// Placed says where a span of a resource walked with Hold or Watch
	// belongs, while its batch is being walked. s.Held is the span, held in
	// the resource's chunk; zero when the resource is still in its batch
	// (Watch, no span of it waits) or Hold's notHeld said so.
	Placed(r *Resource, s SpanRef, at Placement[D])

	// Resolved says where a span that waited for its step span belongs
	// once the step span came (a later batch), or that it waited in vain
	// (KindExpired). h is the span, still held (zero for one Hold's notHeld
	// kept out, which waited only to be placed).
	Resolved(rank Rank, h Held, at Placement[D])
}

// Base has no-op methods for the Observer methods a Holder has no use for.
type Base[D any] struct{}

func (Base[D]) Resource(*Resource)                       {}
func (Base[D]) Arrived(*Resource, ptrace.Span, StepSpan) {}
func (Base[D]) Decided(*Decision[D])                     {}
func (Base[D]) Tick(time.Time, bool)                     {}

// observing is an Observer as the engine's Holder: it only walks (Walk),
// so nothing is placed or held for it.
type observing[D any] struct{ Observer[D] }

func (observing[D]) Placed(*Resource, SpanRef, Placement[D]) {}
func (observing[D]) Resolved(Rank, Held, Placement[D])       {}

// Resource is the resource being walked, as its user sees it.
type Resource struct {
	Identity
	// seq numbers the resources an engine walks (the budget gives up
	// waiting spans one resource at a time).
	seq uint64
	// Attrs are the resource's attributes.
	Attrs pcommon.Map
	// Arrival is the engine's time of the batch, At the wall clock's.
	Arrival time.Duration
	At      time.Time
	// Chunk holds the resource once it left its batch: from the start
	// with Batch.Hold, once one of its spans waits with Batch.Watch; nil
	// while it is in its batch.
	Chunk *Chunk
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
// resource walked, found in its scope number Scope; Held is the span held
// in the resource's chunk, for a Holder (zero when not held).
type SpanRef struct {
	Span         ptrace.Span
	Index, Scope int
	Held         Held
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
	// Decided is the user's value of the step's decision when the step
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
	// Value is the user's value of the step: zero at its first
	// decision; what the user set then, when reopened.
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
