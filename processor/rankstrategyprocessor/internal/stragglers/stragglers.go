// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package stragglers is rank_strategy's straggler retention: it holds the
// step subtrees of the ranks the strategy drops until their step is
// decided, and keeps a rank's step when it straggled, marked with its
// scores. It is a holder of the step engine (internal/steps), which
// walks the spans, places them in steps and scores the steps on busy time;
// this package keeps only its policy: which held ranks to keep.
//
// This file is the face rank_strategy calls (Consume with Hold and
// ObserveKept, Start, Shutdown) and the engine's holder; held.go holds
// spans in their steps and keeps the budget; decide.go is the policy;
// output.go passes the kept spans on.
package stragglers // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor/internal/stragglers"

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/internal/clock"
	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// Config is what straggler retention needs: the step settings, the
// thresholds and caps of rank_strategy's stragglers block.
type Config struct {
	steps.Settings
	steps.Waits
	// MaxRanksPerStep caps the stragglers kept per step, worst first.
	MaxRanksPerStep int
	// MaxBufferedSpans bounds the spans held, and the rank steps and waits
	// of open steps.
	MaxBufferedSpans int
	// DecisionCacheSize is how many decided steps are remembered.
	DecisionCacheSize int
	// Exceptional says which spans keep_errors passes on whatever the rank:
	// they are read for busy times, never held.
	Exceptional func(ptrace.Span) bool
	// Summarize: an agent in front of gateways. The dropped ranks'
	// steps are summarized for the gateway (summarize.go), a step is
	// decided once every rank of its run this agent hears from reported it,
	// and a rank is kept as a straggler on the scores of this node's ranks
	// (see the README). ProgressInterval is the beats' interval.
	Summarize        bool
	ProgressInterval time.Duration
	// IdentityKeys are the resource attributes the summaries carry
	// (stepsummary.IdentityKeys and the keys that name a rank and its run).
	IdentityKeys []string
}

// Tally is what the buffer did, for rank_strategy's telemetry.
type Tally struct {
	// Kept are spans kept as stragglers, Dropped spans of dropped ranks let
	// go, Held the change in spans held.
	Kept, Dropped, Held                          int64
	StepsDecided, StragglersKept, EarlyDecisions int64
	// LateSpans arrived after their step's decision (CacheHits: the
	// decision was still remembered).
	LateSpans, CacheHits int64
	// SendFailed are kept spans the next consumer refused (they are sent
	// again at the next tick), RanksMissing ranks of a step's world that
	// had not reported when its decision_wait ended.
	SendFailed, RanksMissing int64
	// Summaries are the step summaries, phase envelopes and progress beats
	// written for the gateway (summarize).
	Summaries int64
}

// Buffer is straggler retention. It is safe for concurrent use.
type Buffer struct {
	steps.Base[decision]
	engine      *steps.Engine[decision]
	thresholds  stepbusy.Thresholds
	maxHeld     int
	exceptional func(ptrace.Span) bool
	logger      *zap.Logger
	record      func(context.Context, *Tally)

	// Under the engine's lock: what it did since the last count, and what
	// the last tick did, counted when it sends.
	t, ticked Tally
	steps     heldSteps
	// cur is the resource being walked: its rank's summary, when it is
	// held and summarized.
	cur struct {
		summary *summaryRank
	}
	// held counts the spans of every chunk that still holds a span; with
	// the kept spans not sent yet, what max_buffered_spans bounds.
	held int
	// collected counts the kept spans in the output since the last tick.
	collected      int
	warnedLoneRank bool
	scores         []stepbusy.Score // scratch

	out *steps.Output
	// sum writes the summaries of the dropped ranks (nil: not summarize).
	sum *summarizer
}

// New builds the buffer: kept spans go to next from its ticker; record
// counts what it did.
func New(cfg *Config, clk clock.Clock, logger *zap.Logger, next consumer.Traces, record func(context.Context, *Tally)) (*Buffer, error) {
	b := &Buffer{
		thresholds:  cfg.Thresholds(cfg.MaxRanksPerStep),
		maxHeld:     cfg.MaxBufferedSpans,
		exceptional: cfg.Exceptional,
		logger:      logger,
		record:      record,
		steps:       newHeldSteps(),
	}
	engine, err := steps.New(steps.Config{
		Spans: cfg.Spans, WaitSpans: cfg.WaitSpans, Waits: cfg.Waits,
		Scores: true, History: cfg.History, DecidedSize: cfg.DecisionCacheSize,
		OverBudget: b.overBudget, KeyPrefix: "stragglers::", LocalWorld: cfg.Summarize,
		Next: next, SpansName: "kept straggler spans",
	}, b, clk, logger)
	if err != nil {
		return nil, fmt.Errorf("stragglers: %w", err)
	}
	b.engine, b.out = engine, engine.Output()
	if cfg.Summarize {
		b.sum = newSummarizer(b.out, cfg.ProgressInterval, cfg.IdentityKeys)
	}
	return b, nil
}

// Start starts the decision ticker.
func (b *Buffer) Start() { b.engine.Start(0) }

// Shutdown decides every open step at once, drops what waits for a step,
// and passes the kept spans on before returning, so that nothing kept is
// lost.
func (b *Buffer) Shutdown() error {
	if err := b.engine.Shutdown(); err != nil {
		return fmt.Errorf("pass on kept straggler spans at shutdown: %w", err)
	}
	return nil
}

// Batch is one batch's view of the buffer, inside Consume.
type Batch struct {
	b  *Buffer
	eb *steps.Batch[decision]
}

// Consume runs fn, which holds or observes the resources of one batch,
// under the buffer's lock; it reports false, without running fn, once the
// buffer is shut down.
func (b *Buffer) Consume(ctx context.Context, fn func(*Batch)) bool {
	var t Tally
	_, ok := b.engine.Consume(func(eb *steps.Batch[decision]) {
		fn(&Batch{b: b, eb: eb})
		t, b.t = b.t, Tally{}
	})
	if ok {
		b.record(ctx, &t)
	}
	return ok
}

// ErrFull says the buffer cannot take more spans: what it kept cannot be
// passed on (the next consumer refuses it) and its budget is spent. Data is
// refused, retryably, until it can.
var ErrFull = errors.New("straggler retention: max_buffered_spans reached while the kept straggler spans cannot be passed on; retry later")

// Full reports whether the buffer is full of kept spans it cannot pass on.
func (b *Buffer) Full() bool { return b.out.Unsent() > b.maxHeld }

// Hold takes over rs, a resource of rank id the strategy drops: the engine
// moves it out of its batch and holds its spans, which wait for their
// step's decision instead of being dropped. When keep_errors passed some of
// them on (exceptional), rs is a copy of the resource in which those are
// read for busy times, never held.
func (h *Batch) Hold(rs ptrace.ResourceSpans, id steps.Identity, exceptional bool) {
	b := h.b
	var notHeld func(ptrace.Span) bool
	if exceptional {
		notHeld = b.exceptional
	}
	c, emptied := h.eb.Hold(rs, id, notHeld)
	b.cur.summary = nil
	switch {
	case emptied:
		b.uncount(c)
	case b.sum == nil:
		// Most held spans are let go unread at their step's decision:
		// held packed, a wave of steps takes a third of the memory. An
		// agent summarizing reads every dropped rank's step span at the
		// decision (its summary), so it holds them decoded.
		c.Pack()
	}
}

// ObserveKept reads the step and wait spans of a resource of rank id the
// strategy keeps: its spans pass through untouched, but its busy times
// count like every other rank's.
func (h *Batch) ObserveKept(rs ptrace.ResourceSpans, id steps.Identity) {
	h.eb.Walk(rs, id)
}

// Resource counts the spans of a resource held (Hold) before they are
// placed, so that the engine's budget sees them, and looks its rank's
// summary up.
func (b *Buffer) Resource(r *steps.Resource) {
	c := r.Chunk
	if c == nil {
		return // read, not held (ObserveKept)
	}
	b.held += c.Len()
	b.t.Held += int64(c.Len())
	if b.sum != nil {
		b.cur.summary = b.sum.rank(r.Rank, r.Attrs)
	}
}

// Placed: a span of a dropped rank, placed as it arrived (an empty Held:
// keep_errors passed it on).
func (b *Buffer) Placed(r *steps.Resource, ref steps.SpanRef, at steps.Placement[decision]) {
	b.place(r.Rank, ref.Held, at)
}

// Resolved: a held span that waited, placed now, or given up.
func (b *Buffer) Resolved(rank steps.Rank, s steps.Held, at steps.Placement[decision]) {
	b.place(rank, s, at)
}

// Arrived follows a dropped rank's progress for its beats, when
// summarizing.
func (b *Buffer) Arrived(r *steps.Resource, s ptrace.Span, step steps.StepSpan) {
	if sr := b.cur.summary; sr != nil {
		sr.arrived(r, s, step)
	}
}

// Tick writes the progress beats due; the engine then sends the kept spans
// and summaries.
func (b *Buffer) Tick(now time.Time, final bool) {
	if b.sum != nil {
		if !final {
			b.sum.beats(now)
		}
		b.t.Summaries, b.sum.written = b.sum.written, 0
	}
	b.collected = 0
	b.ticked, b.t = b.t, Tally{}
}

// Send counts what the tick did: the kept spans the engine passed on are
// no longer held (the summaries never were), and those the next consumer
// refused, sent again at the next tick.
func (b *Buffer) Send(st *steps.Stats, _ bool) error {
	t := b.ticked
	t.Held -= st.Queued - t.Summaries
	t.SendFailed += st.SendFailed
	b.record(context.Background(), &t)
	return nil
}

var _ steps.Holder[decision] = (*Buffer)(nil)
