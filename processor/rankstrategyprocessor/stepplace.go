// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor"

import (
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

type placement uint8

const (
	placedInStep placement = iota // tied to a step, open or decided
	placedPending
	placedDropped
)

// place ties a newly arrived span to its step when it can: a step span is
// its own step, whether it is a trace root or a child of a job span; another
// span is in its parent's step when the parent was seen. A root span that is
// not a step span belongs to no step. With deferLookup the parent is not
// looked up: the span waits, and resolvePending ties it after the chunk is
// placed.
func (b *stragglerBuffer) place(id rankID, worldSize int64, ref spanRef, deferLookup bool, now time.Duration, t *tally) placement {
	s := ref.span
	key := spanKey{owner: id.owner, trace: foldTraceID(s.TraceID()), span: s.SpanID()}
	if b.spans.IsStep(s.Name()) {
		if iteration, ok := b.spans.Iteration(s); ok {
			b.stepSeen = true
			b.spanSteps.put(key, iteration)
			b.joinAsStep(id, worldSize, ref, iteration, now, t)
			return placedInStep
		}
	}
	parent := s.ParentSpanID()
	if parent.IsEmpty() {
		b.drop(ref, t)
		return placedDropped
	}
	if deferLookup {
		return placedPending
	}
	if iteration, ok := b.spanSteps.get(spanKey{owner: id.owner, trace: key.trace, span: parent}); ok {
		b.spanSteps.put(key, iteration)
		b.join(id, ref, iteration, t)
		return placedInStep
	}
	return placedPending
}

// hasStepSpan reports whether the resource holds a step span. Spans end,
// and so are exported, children first: the step span comes with or after
// the rest of its subtree, which then finds its step through it.
func (b *stragglerBuffer) hasStepSpan(rs ptrace.ResourceSpans) bool {
	sss := rs.ScopeSpans()
	for i := 0; i < sss.Len(); i++ {
		spans := sss.At(i).Spans()
		for j := spans.Len() - 1; j >= 0; j-- {
			if s := spans.At(j); b.spans.IsStep(s.Name()) {
				if _, ok := b.spans.Iteration(s); ok {
					return true
				}
			}
		}
	}
	return false
}

// tryResolve ties a pending span to its parent's step if the parent is known.
func (b *stragglerBuffer) tryResolve(id rankID, ref spanRef, _ time.Duration, t *tally) bool {
	s := ref.span
	trace := foldTraceID(s.TraceID())
	iteration, ok := b.spanSteps.get(spanKey{owner: id.owner, trace: trace, span: s.ParentSpanID()})
	if !ok {
		return false
	}
	b.spanSteps.put(spanKey{owner: id.owner, trace: trace, span: s.SpanID()}, iteration)
	b.join(id, ref, iteration, t)
	return true
}

// resolvePending ties a rank's pending spans to steps after some of its
// spans found theirs. Children end, and so arrive, before their parents:
// walking the pending spans newest first meets a parent before its children,
// so one pass ties a whole subtree whatever batches it came in. Spans left
// over whose parent is now known (a parent that arrived before its child)
// are tied through an index of the pending spans by parent.
func (b *stragglerBuffer) resolvePending(st *rankState, now time.Duration, t *tally) {
	u := st.unresolved
	if len(u) == 0 {
		return
	}
	resolved := false
	for i := len(u) - 1; i >= 0; i-- {
		if b.tryResolve(st.id, u[i], now, t) {
			u[i].chunk = nil
			resolved = true
		}
	}
	if resolved {
		b.resolveRemaining(st, now, t)
	}
	kept := u[:0]
	for _, ref := range u {
		if ref.chunk != nil {
			kept = append(kept, ref)
		}
	}
	clear(u[len(kept):])
	st.unresolved = kept
}

func (b *stragglerBuffer) resolveRemaining(st *rankState, now time.Duration, t *tally) {
	u := st.unresolved
	queue := b.queueIdx[:0]
	for i, ref := range u {
		if ref.chunk == nil {
			continue
		}
		if _, ok := b.spanSteps.get(b.parentKey(st.id, ref)); ok {
			queue = append(queue, int32(i))
		}
	}
	if len(queue) == 0 {
		b.queueIdx = queue
		return
	}
	clear(b.childHead)
	next := slices.Grow(b.childNext[:0], len(u))[:len(u)]
	for i := len(u) - 1; i >= 0; i-- {
		ref := u[i]
		next[i] = -1
		if ref.chunk == nil {
			continue
		}
		pk := b.parentKey(st.id, ref)
		if head, ok := b.childHead[pk]; ok {
			next[i] = head
		}
		b.childHead[pk] = int32(i)
	}
	for len(queue) > 0 {
		i := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		ref := u[i]
		if ref.chunk == nil || !b.tryResolve(st.id, ref, now, t) {
			continue
		}
		u[i].chunk = nil
		own := spanKey{owner: st.id.owner, trace: foldTraceID(ref.span.TraceID()), span: ref.span.SpanID()}
		if head, ok := b.childHead[own]; ok {
			for c := head; c >= 0; c = next[c] {
				queue = append(queue, c)
			}
			delete(b.childHead, own)
		}
	}
	b.queueIdx = queue
	b.childNext = next
}

func (*stragglerBuffer) parentKey(id rankID, ref spanRef) spanKey {
	return spanKey{owner: id.owner, trace: foldTraceID(ref.span.TraceID()), span: ref.span.ParentSpanID()}
}

// joinAsStep handles a rank's step span: it records the rank's step in its
// open step and holds the span there. A dropped rank reporting after its
// step was decided reopens the step until the next tick, so that its wait
// spans, which arrive with it, count in its busy time; the ranks already
// decided keep their decision.
func (b *stragglerBuffer) joinAsStep(id rankID, worldSize int64, ref spanRef, iteration int64, now time.Duration, t *tally) {
	key := steps.Step{Group: id.group, Iteration: iteration}
	st := b.open.Get(key)
	if st == nil {
		d, _ := b.decided.Get(key)
		switch {
		case d == nil:
			st = b.openStep(key, now, nil)
		case ref.chunk.observed:
			// A kept rank reporting late changes nothing decided.
			b.release(ref.chunk, t)
			return
		default:
			if _, kept := d.keptScore(id.rank); kept || len(d.kept) >= b.thresholds.MaxRanks {
				b.join(id, ref, iteration, t)
				return
			}
			st = b.openStep(key, now, d)
			b.open.MarkComplete(st)
		}
	}
	b.report(st, id, worldSize, ref)
	b.holdIn(st, id, ref, t)
}

// join holds a span in its open step, or makes it follow its step's decision.
func (b *stragglerBuffer) join(id rankID, ref spanRef, iteration int64, t *tally) {
	key := steps.Step{Group: id.group, Iteration: iteration}
	if st := b.open.Get(key); st != nil {
		b.holdIn(st, id, ref, t)
		return
	}
	d, _ := b.decided.Get(key)
	if d == nil {
		// Decided so long ago that the decision was evicted: dropped, as
		// most ranks' steps are.
		b.follow(ref, false, stepbusy.Score{}, false, t)
		return
	}
	score, keep := d.keptScore(id.rank)
	b.follow(ref, keep, score, true, t)
}

// follow applies a decision taken before the span arrived.
func (b *stragglerBuffer) follow(ref spanRef, keep bool, score stepbusy.Score, cached bool, t *tally) {
	if !ref.ghost {
		t.lateSpans++
		if cached {
			t.cacheHits++
		}
	}
	if keep {
		b.emit(ref, score, t)
	} else {
		b.drop(ref, t)
	}
}

// holdIn records the span in its rank's part of the open step: a wait span
// gives its interval to the busy time; a span not yet passed on waits for
// the decision.
func (b *stragglerBuffer) holdIn(st *openStep, id rankID, ref spanRef, t *tally) {
	rs := b.rankIn(st, id)
	if !ref.chunk.observed {
		rs.dropped = true
	}
	if b.spans.IsWait(ref.span.Name()) {
		rs.waits = append(rs.waits, spanInterval(ref.span))
		st.Value.observed++
		b.observed++
	}
	if st.Value.prior != nil && !ref.ghost {
		t.lateSpans++
		t.cacheHits++
	}
	if ref.ghost {
		b.release(ref.chunk, t)
		return
	}
	if rs.held == nil {
		rs.held = make([]spanRef, 0, b.rankStepHint)
	}
	rs.held = append(rs.held, ref)
}

// report records a rank's step span; a step is complete when every rank of
// its world has reported.
func (b *stragglerBuffer) report(st *openStep, id rankID, worldSize int64, ref spanRef) {
	rs := b.rankIn(st, id)
	iv := spanInterval(ref.span)
	if !rs.reported {
		rs.reported = true
		st.Value.reported++
		rs.start, rs.end = iv.Start, iv.End
	} else if iv.End-iv.Start > rs.end-rs.start {
		rs.start, rs.end = iv.Start, iv.End
	}
	b.open.Report(st, worldSize, st.Value.reported)
}
