// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package steps // import "github.com/nemo-lens/otelcol-nemo/internal/steps"

import (
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
	"github.com/nemo-lens/otelcol-nemo/internal/stepsummary"
)

// Batch walks the resources of one batch, under the engine's lock (see
// Engine.Consume); it is valid only inside Consume's function.
type Batch[D any] struct {
	e       *Engine[D]
	at      time.Time
	arrival time.Duration

	// The resource being walked, and how.
	res     Resource
	rs      ptrace.ResourceSpans
	mode    walkMode
	notHeld func(ptrace.Span) bool
	st      *rankState
	scopes  []ptrace.SpanSlice
	pending []pendingRef
	// deferred are, with Watch, the spans placed while the resource is in
	// its batch: the holder is told once it is known whether it leaves.
	deferred []deferredPlace[D]
}

// walkMode is how a resource is walked.
type walkMode uint8

const (
	// readOnly: its spans are read, never held (Walk).
	readOnly walkMode = iota
	// holdAll: it leaves its batch first, every span held (Hold).
	holdAll
	// holdWaiting: it leaves its batch when a span of it waits for its
	// step span, every span then held (Watch).
	holdWaiting
)

// deferredPlace is a span placed while its resource was in its batch.
type deferredPlace[D any] struct {
	ref SpanRef
	at  Placement[D]
}

// Skip counts the step and wait spans of a resource without a usable rank
// (status Missing or Invalid).
func (b *Batch[D]) Skip(rs ptrace.ResourceSpans, status rankattr.Status) {
	reason := SkipMissingRank
	if status == rankattr.Invalid {
		reason = SkipInvalidRank
	}
	spans := &b.e.spans
	for _, ss := range rs.ScopeSpans().All() {
		for _, s := range ss.Spans().All() {
			if name := s.Name(); spans.IsStep(name) || spans.IsWait(name) {
				b.e.stats.Skipped[reason]++
			}
		}
	}
}

// Walk reads rs, a resource of the rank id: its spans are tied to its
// rank's steps, the step and wait spans recorded for the steps' scores, and
// the engine's user told: Resource first, then Arrived for every span in
// batch order. Nothing is held: the resource stays in its batch.
func (b *Batch[D]) Walk(rs ptrace.ResourceSpans, id Identity) {
	b.walk(rs, id, readOnly, nil, nil)
}

// Hold moves rs, a resource of the rank id, out of its batch into a chunk
// (no copy) and walks it as Walk does, holding its spans for the Holder:
// each is Placed with its Held, or, when its step span has not come, held
// by the engine until Resolved. Spans notHeld says (nil: none) are read and
// placed, never held. It returns the chunk and whether it already holds
// nothing (every span let go while it was walked): then it is freed.
func (b *Batch[D]) Hold(rs ptrace.ResourceSpans, id Identity, notHeld func(ptrace.Span) bool) (c *Chunk, emptied bool) {
	c = NewChunk(rs, id.Rank, b.arrival)
	b.walk(c.rs, id, holdAll, notHeld, c)
	emptied = c.Placed()
	return c, emptied
}

// Watch walks rs, a resource of the rank id, as Walk does, and tells the
// Holder where each span belongs (Placed). When a span's step span has not
// come, the resource leaves its batch into a chunk and all its spans are
// held (Placed with their Held; the waiting ones Resolved later); it
// returns that chunk, nil when the resource stays in its batch.
func (b *Batch[D]) Watch(rs ptrace.ResourceSpans, id Identity) *Chunk {
	c := b.walk(rs, id, holdWaiting, nil, nil)
	if c != nil {
		c.Placed() // a span waits: it holds one at least
	}
	return c
}

// walk ties every span of rs to its rank's step, recording step and wait
// spans for the step's scores, and tells the engine's user. Spans end, and
// so are exported, children first: a step's spans come before its step
// span. So each step span is recorded before the spans that precede it in
// its scope are placed; that way a batch of many steps of a rank places
// each span while its step is among the few the rank's timeline remembers.
// The engine keeps within its budget after each resource. It returns the
// chunk that holds the resource in the end (nil: it stayed in its batch).
func (b *Batch[D]) walk(rs ptrace.ResourceSpans, id Identity, mode walkMode, notHeld func(ptrace.Span) bool, c *Chunk) *Chunk {
	e := b.e
	b.res = Resource{Identity: id, seq: b.res.seq + 1, Attrs: rs.Resource().Attributes(), Arrival: b.arrival, At: b.at, Chunk: c}
	b.rs, b.mode, b.notHeld = rs, mode, notHeld
	b.st = e.rank(id.Rank)
	e.l.Resource(&b.res)
	// The scopes' span lists, taken first: the resource may leave its
	// batch while it is walked (Watch).
	b.scopes = b.scopes[:0]
	for _, ss := range rs.ScopeSpans().All() {
		b.scopes = append(b.scopes, ss.Spans())
	}
	b.pending = b.pending[:0]
	k := 0
	for i, spans := range b.scopes {
		if ss := rs.ScopeSpans().At(i); stepsummary.IsScope(ss) {
			b.summaries(ss)
			k += spans.Len()
			continue
		}
		next := 0 // the first span of the scope not placed yet
		for j := 0; j < spans.Len(); j++ {
			s := spans.At(j)
			step := b.stepSpan(s)
			e.l.Arrived(&b.res, s, step)
			if !step.Is {
				continue
			}
			b.addStep(s, step.Iteration)
			b.resolve()
			for ; next < j; next++ {
				b.place(SpanRef{Span: spans.At(next), Index: k + next, Scope: i})
			}
			next = j + 1
			if mode != readOnly {
				b.tell(SpanRef{Span: s, Index: k + j, Scope: i}, e.placement(b.res.StepOf(step.Iteration), KindStep))
			}
		}
		for ; next < spans.Len(); next++ {
			b.place(SpanRef{Span: spans.At(next), Index: k + next, Scope: i})
		}
		k += spans.Len()
	}
	b.settlePending()
	clear(b.scopes)
	b.st, b.rs, b.notHeld = nil, ptrace.ResourceSpans{}, nil
	c, b.res.Chunk = b.res.Chunk, nil
	e.enforceBudget()
	return c
}

// tell tells the holder where a span of the resource walked belongs,
// holding it when the resource left its batch; with Watch, while the
// resource is in its batch, it is told later (settlePending).
func (b *Batch[D]) tell(ref SpanRef, at Placement[D]) {
	if b.mode == holdWaiting && b.res.Chunk == nil {
		b.deferred = append(b.deferred, deferredPlace[D]{ref: ref, at: at})
		return
	}
	ref.Held = b.hold(ref)
	b.e.l.Placed(&b.res, ref, at)
}

// hold holds a span of the resource walked in its chunk, unless notHeld
// says not to.
func (b *Batch[D]) hold(ref SpanRef) Held {
	if b.notHeld != nil && b.notHeld(ref.Span) {
		return Held{}
	}
	return b.res.Chunk.Hold(ref.Index, ref.Scope)
}

// leave moves the resource watched out of its batch, because a span of it
// waits, and tells the holder of the spans placed so far, held.
func (b *Batch[D]) leave() {
	b.res.Chunk = NewChunk(b.rs, b.res.Rank, b.arrival)
	b.tellDeferred()
}

// tellDeferred tells the holder of the spans placed while the resource was
// in its batch: held if it has left it since.
func (b *Batch[D]) tellDeferred() {
	for i := range b.deferred {
		d := &b.deferred[i]
		if b.res.Chunk != nil {
			d.ref.Held = b.hold(d.ref)
		}
		b.e.l.Placed(&b.res, d.ref, d.at)
	}
	clear(b.deferred)
	b.deferred = b.deferred[:0]
}

// stepSpan says whether s is a usable step span, counting one without a
// usable iteration (it is placed like any other span).
func (b *Batch[D]) stepSpan(s ptrace.Span) StepSpan {
	spans := &b.e.spans
	if !spans.IsStep(s.Name()) {
		return StepSpan{}
	}
	iteration, ok := spans.Iteration(s)
	if !ok {
		b.e.stats.Skipped[SkipMissingIteration]++
		return StepSpan{}
	}
	b.e.stepSeen = true
	return StepSpan{Is: true, Iteration: iteration}
}

// summaries reads a summary scope: the ranks an agent summarized count as
// if their spans had come (internal/stepsummary). A step summary is
// recorded as its step span with one wait interval of its wait time, so
// that its busy time is the agent's; every summary arrives as the span it
// stands for. Summaries are never placed or held: they are not data.
func (b *Batch[D]) summaries(ss ptrace.ScopeSpans) {
	e := b.e
	spans := ss.Spans()
	if v := ss.Scope().Version(); v != stepsummary.Version {
		e.stats.Skipped[SkipSummaryVersion] += int64(spans.Len())
		e.warnSummaryVersion(v)
		return
	}
	for _, s := range spans.All() {
		item, ok := stepsummary.Read(s)
		if !ok {
			e.stats.Skipped[SkipSummaryUnreadable]++
			continue
		}
		if item.Kind != stepsummary.KindStep {
			e.l.Arrived(&b.res, s, StepSpan{Summary: &item})
			continue
		}
		e.stepSeen = true
		e.l.Arrived(&b.res, s, StepSpan{Is: true, Iteration: item.Iteration, Summary: &item})
		if b.addStep(s, item.Iteration) && item.Wait > 0 {
			start := Nanos(s.StartTimestamp())
			e.addWait(b.res.StepOf(item.Iteration), b.res.Rank.Rank, stepbusy.Interval{Start: start, End: start + item.Wait})
		}
	}
}

// addStep records a rank's step span: on its timeline, and in its open
// step for the scores. A step span without a usable duration is neither.
// It reports whether the step was recorded in its open step now.
func (b *Batch[D]) addStep(s ptrace.Span, iteration int64) bool {
	iv := IntervalOf(s)
	if iv.End <= iv.Start {
		b.e.stats.Skipped[SkipInvalidDuration]++
		return false
	}
	// Seen already (a batch sent twice): recorded once.
	if b.st.steps.Seen(iteration, iv.Start, iv.End) {
		return false
	}
	b.st.steps.Add(iteration, iv.Start, iv.End)
	if !b.e.cfg.Scores {
		return false
	}
	world := b.res.WorldSize
	if b.e.cfg.LocalWorld {
		world = b.e.groupRanks[b.res.Group]
	}
	return b.e.report(b.res.StepOf(iteration), b.res.Rank.Rank, world, s, iv, b.arrival)
}

// place places a span that is not a usable step span: a trace root (a job
// span) belongs to no step; any other span to the step span of its rank
// that covers its start, or it waits for that step span (settlePending).
// Of a resource not kept only the wait spans matter.
func (b *Batch[D]) place(ref SpanRef) {
	e := b.e
	s := ref.Span
	isWait := e.cfg.Scores && e.spans.IsWait(s.Name())
	if b.mode == readOnly && !isWait {
		return
	}
	iteration, where := int64(0), Outside
	if !s.ParentSpanID().IsEmpty() {
		iteration, where = b.st.steps.Place(Nanos(s.StartTimestamp()))
	}
	if where == Unknown {
		b.pending = append(b.pending, pendingRef{SpanRef: ref, isWait: isWait})
		return
	}
	b.placed(ref, isWait, iteration, where)
}

// pendingRef is a span of the resource walked that no step span placed
// during the walk.
type pendingRef struct {
	SpanRef
	isWait bool
}

// placed records a placed span: a wait in its step for the rank's busy
// time, and tells the holder, for Hold and Watch.
func (b *Batch[D]) placed(ref SpanRef, isWait bool, iteration int64, where Place) {
	e := b.e
	kind := KindOutside
	if where == InStep {
		kind = KindCompute
		if isWait {
			kind = KindWait
			e.addWait(b.res.StepOf(iteration), b.res.Rank.Rank, IntervalOf(ref.Span))
		}
	}
	if b.mode != readOnly {
		b.tell(ref, e.placement(b.res.StepOf(iteration), kind))
	}
}

// resolve places the rank's waiting spans again, after a new step span.
func (b *Batch[D]) resolve() {
	e, st := b.e, b.st
	if st.waiting.Len() == 0 {
		return
	}
	rank := b.res.Rank
	st.waiting.Resolve(&st.steps, func(w waitingSpan, iteration int64, where Place) bool {
		if where == Unknown {
			return false
		}
		e.settle(rank, w, iteration, where)
		return true
	})
}

// settlePending places the resource's spans that no step span placed during
// the walk, now that all its step spans are known (a later scope's may
// place an earlier one's), and has the others wait.
func (b *Batch[D]) settlePending() {
	e, st := b.e, b.st
	for _, ref := range b.pending {
		start := Nanos(ref.Span.StartTimestamp())
		if iteration, where := st.steps.Place(start); where != Unknown {
			b.placed(ref.SpanRef, ref.isWait, iteration, where)
			continue
		}
		w := waitingSpan{isWait: ref.isWait, seq: b.res.seq}
		if ref.isWait {
			w.iv = IntervalOf(ref.Span)
		}
		if b.mode != readOnly {
			if b.res.Chunk == nil {
				b.leave()
			}
			w.kept, w.held = true, b.hold(ref.SpanRef)
			e.stats.Waiting += w.heldCount()
		}
		st.waiting.Add(w, start, b.arrival)
		e.counts.Waiting++
	}
	clear(b.pending)
	b.pending = b.pending[:0]
	b.tellDeferred() // the resource stays in its batch
}
