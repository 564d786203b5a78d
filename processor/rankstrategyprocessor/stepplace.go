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

// noExpiry and noLimit add to a rank's pending spans without forgetting
// any: they are expired by the ticker (span_wait) and the budget
// (max_buffered_spans), which release what they hold.
const (
	noExpiry = time.Duration(math.MinInt64)
	noLimit  = math.MaxInt
)

// resourcePlacer places the spans of one resource of one rank. The rank's
// timeline and state are looked up once, at the first span that needs them.
type resourcePlacer struct {
	b         *stragglerBuffer
	id        rankID
	worldSize int64
	now       time.Duration
	// chunk holds the resource of a dropped rank; nil for a kept rank,
	// whose spans pass through and are only read for busy times.
	chunk *steps.Chunk[rankID]
	// exceptional: some spans of the chunk were passed on by keep_errors;
	// they are read like a kept rank's, never held.
	exceptional bool
	timeline    *stepbusy.RankSteps
	state       *rankState
}

// place ties every span of the resource to its step. A step span is its own
// step; another span is in the step span of its rank that covers its start
// (steps.Where), Outside every step, or waits for its step span. Spans end,
// and so are exported, children first: a step's spans come before its step
// span. So each step span is recorded before the spans preceding it in its
// scope are placed; that way a batch of many steps of a rank places each
// span while its step is among the few the timeline remembers.
func (r *resourcePlacer) place(rs ptrace.ResourceSpans, t *tally) {
	b := r.b
	k := 0 // the span's number in the chunk
	sss := rs.ScopeSpans()
	for i := 0; i < sss.Len(); i++ {
		spans := sss.At(i).Spans()
		next := 0 // the first span of the scope not placed yet
		for j := 0; j < spans.Len(); j++ {
			s := spans.At(j)
			if !b.spans.IsStep(s.Name()) {
				continue
			}
			iteration, ok := b.spans.Iteration(s)
			if !ok {
				continue // not a usable step span: placed like any other span
			}
			b.stepSeen = true
			iv := spanInterval(s)
			r.rankTimeline().Add(iteration, iv.Start, iv.End)
			b.joinAsStep(r.id, r.worldSize, r.item(s, k+j, i, false, iv), iteration, r.now, t)
			r.resolvePending(t)
			for ; next < j; next++ {
				r.placeSpan(spans.At(next), k+next, i, t)
			}
			next = j + 1
		}
		for ; next < spans.Len(); next++ {
			r.placeSpan(spans.At(next), k+next, i, t)
		}
		k += spans.Len()
	}
}

// item is what the buffer keeps of span number n of the resource: the span
// itself when held, and the interval of a wait or step span.
func (r *resourcePlacer) item(s ptrace.Span, n, scope int, wait bool, iv stepbusy.Interval) pendingSpan {
	it := pendingSpan{wait: wait, iv: iv, dropped: r.chunk != nil}
	if r.chunk != nil && (!r.exceptional || !isExceptional(s)) {
		it.held = r.chunk.Hold(n, scope, s)
	}
	return it
}

// placeSpan places a span that is not a usable step span. Of a kept rank
// only the wait spans matter.
func (r *resourcePlacer) placeSpan(s ptrace.Span, n, scope int, t *tally) {
	b := r.b
	wait := b.spans.IsWait(s.Name())
	if r.chunk == nil && !wait {
		return
	}
	var iv stepbusy.Interval
	if wait {
		iv = spanInterval(s)
	}
	it := r.item(s, n, scope, wait, iv)
	if it.held.Chunk == nil && !wait {
		return // passed on by keep_errors, and no wait
	}
	iteration, where := steps.Where(r.rankTimeline(), s)
	switch where {
	case stepbusy.InStep:
		b.join(r.id, it, iteration, t)
	case stepbusy.Outside:
		b.drop(it.held, t)
	default:
		r.rankState().pending.Add(it, steps.Nanos(s.StartTimestamp()), r.now, noExpiry, noLimit)
	}
}

// isExceptional: keep_errors keeps the span whatever its rank.
func isExceptional(s ptrace.Span) bool {
	_, ok := spanKeepReason(s)
	return ok
}

func (r *resourcePlacer) rankTimeline() *stepbusy.RankSteps {
	if r.timeline == nil {
		r.timeline = r.b.placer.Rank(r.id.owner)
	}
	return r.timeline
}

func (r *resourcePlacer) rankState() *rankState {
	if r.state == nil {
		r.state = r.b.rankState(r.id, r.now)
	}
	return r.state
}

// resolvePending places again, after a new step span of the rank, the
// rank's spans that wait for their step span.
func (r *resourcePlacer) resolvePending(t *tally) {
	b := r.b
	st := r.state
	if st == nil {
		st = b.ranks[r.id.owner]
		if st == nil {
			return
		}
		r.state = st
	}
	if st.pending.Len() == 0 {
		return
	}
	placed, _ := steps.Resolve(r.rankTimeline(), &st.pending, noExpiry, b.placed[:0])
	for _, p := range placed {
		if p.Where == stepbusy.InStep {
			b.join(r.id, p.Item, p.Iteration, t)
		} else {
			b.drop(p.Item.held, t)
		}
	}
	clear(placed)
	b.placed = placed[:0]
}

// rankState is the rank's state, created when new.
func (b *stragglerBuffer) rankState(id rankID, now time.Duration) *rankState {
	st := b.ranks[id.owner]
	if st == nil {
		st = &rankState{id: id}
		b.ranks[id.owner] = st
	}
	st.lastSeen = now
	return st
}

// joinAsStep handles a rank's step span: it records the rank's step in its
// open step and holds the span there. A dropped rank reporting after its
// step was decided reopens the step until the next tick, so that its wait
// spans, which arrive with it, count in its busy time; the ranks already
// decided keep their decision.
func (b *stragglerBuffer) joinAsStep(id rankID, worldSize int64, it pendingSpan, iteration int64, now time.Duration, t *tally) {
	key := steps.Step{Group: id.group, Iteration: iteration}
	st := b.open.Get(key)
	if st == nil {
		d, _ := b.decided.Get(key)
		switch {
		case d == nil:
			st = b.openStep(key, now, nil)
		case !it.dropped:
			return // a kept rank reporting late changes nothing decided
		default:
			if _, kept := d.keptScore(id.rank); kept || len(d.kept) >= b.thresholds.MaxRanks {
				b.join(id, it, iteration, t)
				return
			}
			st = b.openStep(key, now, d)
			b.open.MarkComplete(st)
		}
	}
	b.report(st, id, worldSize, it.iv)
	b.holdIn(st, id, it, t)
}

// join holds a span in its open step, or makes it follow its step's decision.
func (b *stragglerBuffer) join(id rankID, it pendingSpan, iteration int64, t *tally) {
	key := steps.Step{Group: id.group, Iteration: iteration}
	if st := b.open.Get(key); st != nil {
		b.holdIn(st, id, it, t)
		return
	}
	d, _ := b.decided.Get(key)
	if d == nil {
		// Decided so long ago that the decision was evicted: dropped, as
		// most ranks' steps are.
		b.follow(it, false, stepbusy.Score{}, false, t)
		return
	}
	score, keep := d.keptScore(id.rank)
	b.follow(it, keep, score, true, t)
}

// follow applies a decision taken before the span arrived.
func (b *stragglerBuffer) follow(it pendingSpan, keep bool, score stepbusy.Score, cached bool, t *tally) {
	if it.held.Chunk == nil {
		return
	}
	t.lateSpans++
	if cached {
		t.cacheHits++
	}
	if keep {
		b.emit(it.held, score, t)
	} else {
		b.drop(it.held, t)
	}
}

// holdIn records the span in its rank's part of the open step: a wait span
// gives its interval to the busy time; a held span waits for the decision.
func (b *stragglerBuffer) holdIn(st *openStep, id rankID, it pendingSpan, t *tally) {
	rs := b.rankIn(st, id)
	if it.dropped {
		rs.dropped = true
	}
	if it.wait {
		rs.AddWait(it.iv)
		st.Value.observed++
		b.observed++
	}
	if it.held.Chunk == nil {
		return
	}
	if st.Value.prior != nil {
		t.lateSpans++
		t.cacheHits++
	}
	if rs.held == nil {
		rs.held = make([]heldSpan, 0, b.rankStepHint)
	}
	rs.held = append(rs.held, it.held)
}

// report records a rank's step span [iv); a step is complete when every
// rank of its world has reported.
func (b *stragglerBuffer) report(st *openStep, id rankID, worldSize int64, iv stepbusy.Interval) {
	rs := b.rankIn(st, id)
	if !rs.reported {
		rs.reported = true
		st.Value.reported++
		rs.Start, rs.End = iv.Start, iv.End
	} else if iv.End-iv.Start > rs.End-rs.Start {
		rs.Start, rs.End = iv.Start, iv.End
	}
	b.open.Report(st, worldSize, st.Value.reported)
}
