// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepsamplingprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor"

import (
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/pdatautil"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// decideSteps decides every rank step of the batch: kept when its iteration
// is in the sample; otherwise when rank_strategy kept it as a straggler, or
// one of its spans is an error; otherwise when it was kept for one of those
// in an earlier batch; dropped otherwise.
func (p *stepSamplingProcessor) decideSteps(b *batch) {
	for i := range b.steps {
		st := &b.steps[i]
		switch {
		case p.sampler.keep(st.runID, st.key.iteration):
			st.keep, st.reason = true, reasonSampledStep
		case st.straggler:
			st.keep, st.reason = true, reasonStraggler
			p.memory.remember(st.key.rank, st.key.iteration, reasonStraggler)
		case st.err:
			st.keep, st.reason = true, reasonError
			p.memory.remember(st.key.rank, st.key.iteration, reasonError)
		default:
			st.reason, st.keep = p.memory.lookup(st.key.rank, st.key.iteration)
		}
	}
}

// applyBatch carries the decisions out on the batch's resources: kept spans
// stay, marked; dropped ones leave; a resource with spans still to hold
// moves out whole into the held spans.
func (p *stepSamplingProcessor) applyBatch(rss ptrace.ResourceSpansSlice, b *batch, now time.Duration, t *tally) {
	i, f := 0, 0
	rss.RemoveIf(func(rs ptrace.ResourceSpans) bool {
		id := b.ids[i]
		i++
		if !id.ok {
			t.kept[reasonNoRank] += int64(pdatautil.CountSpans(rs))
			return false
		}
		n := pdatautil.CountSpans(rs)
		places := b.places[f : f+n]
		f += n
		kept, dropped, hold := 0, 0, 0
		for _, pl := range places {
			switch {
			case pl.kind == placeHold:
				hold++
			case pl.kind == placeInStep && !b.steps[pl.step].keep:
				dropped++
			default:
				kept++
			}
		}
		switch {
		case hold > 0 && !p.closed:
			p.hold(id, rs, places, b, now, t)
			return true
		case kept == 0 && hold == 0:
			t.dropped += int64(dropped)
			return true
		default:
			p.filterInPlace(rs, places, b, dropped > 0, t)
			return false
		}
	})
}

// filterInPlace removes the dropped spans of a resource that stays in the
// batch and marks and counts the kept ones.
func (p *stepSamplingProcessor) filterInPlace(rs ptrace.ResourceSpans, places []spanPlace, b *batch, anyDropped bool, t *tally) {
	k := 0
	sss := rs.ScopeSpans()
	if !anyDropped {
		for i := 0; i < sss.Len(); i++ {
			spans := sss.At(i).Spans()
			for j := 0; j < spans.Len(); j++ {
				p.account(spans.At(j), places[k], b, t)
				k++
			}
		}
		return
	}
	sss.RemoveIf(func(ss ptrace.ScopeSpans) bool {
		ss.Spans().RemoveIf(func(s ptrace.Span) bool {
			keep := p.account(s, places[k], b, t)
			k++
			return !keep
		})
		return ss.Spans().Len() == 0
	})
}

// account marks and counts a span of the batch; it returns false when the
// span's step is dropped.
func (*stepSamplingProcessor) account(s ptrace.Span, pl spanPlace, b *batch, t *tally) bool {
	switch pl.kind {
	case placeInStep:
		st := &b.steps[pl.step]
		if !st.keep {
			t.dropped++
			return false
		}
		markKept(s, st.reason)
		t.kept[st.reason]++
	case placeHold:
		// Nothing is held after shutdown: the span passes undecided.
		t.undecided[causeShutdown]++
	default:
		t.kept[reasonOutsideStep]++
	}
	return true
}

// markKept says why a span of a kept step was kept, unless an earlier
// processor (rank_strategy) already did.
func markKept(s ptrace.Span, r keepReason) {
	attrs := s.Attributes()
	if _, ok := attrs.Get(attrkey.KeptReason); !ok {
		attrs.PutStr(attrkey.KeptReason, r.String())
	}
}

// hold moves a resource, some of whose spans wait for their step span, out
// of the batch whole. Its dropped spans are gone at once; its kept spans
// are moved on with the held spans decided in this batch.
func (p *stepSamplingProcessor) hold(id rankIdentity, rs ptrace.ResourceSpans, places []spanPlace, b *batch, now time.Duration, t *tally) {
	c := steps.NewChunk(rs, id, now)
	rh := p.held.rank(id.key)
	held := 0
	k := 0
	sss := c.RS.ScopeSpans()
	for i := 0; i < sss.Len(); i++ {
		spans := sss.At(i).Spans()
		for j := 0; j < spans.Len(); j++ {
			pl := places[k]
			switch {
			case pl.kind == placeHold:
				p.held.hold(rh, c.Hold(k, i, spans.At(j)))
				held++
			case pl.kind == placeInStep && !b.steps[pl.step].keep:
				t.dropped++
			default:
				// Kept with this batch: held until emitResolved moves it.
				b.resolved = append(b.resolved, resolvedRef{ref: c.Hold(k, i, spans.At(j)), place: pl})
			}
			k++
		}
	}
	c.Placed()
	p.held.add(c)
	t.held += int64(held)
}

// emitResolved moves the kept spans of held chunks decided in this batch
// into the batch, and lets the dropped ones go.
func (p *stepSamplingProcessor) emitResolved(rss ptrace.ResourceSpansSlice, b *batch, t *tally) {
	if len(b.resolved) == 0 {
		return
	}
	b.mover.Reset(rss)
	for _, r := range b.resolved {
		keep, reason := true, reasonOutsideStep
		if r.place.kind == placeInStep {
			st := &b.steps[r.place.step]
			keep, reason = st.keep, st.reason
		}
		if keep {
			s, _ := r.ref.Move(&b.mover)
			if r.place.kind == placeInStep {
				markKept(s, reason)
			}
			t.kept[reason]++
		} else {
			t.dropped++
		}
		if r.held {
			p.held.settle(r.ref)
			t.held--
		} else {
			r.ref.Release()
		}
	}
	b.mover.Reset(ptrace.ResourceSpansSlice{})
}

// enforceBudget passes the oldest held spans on undecided while more than
// max_buffered_spans are held.
func (p *stepSamplingProcessor) enforceBudget(rss ptrace.ResourceSpansSlice, t *tally) {
	for p.held.count > p.maxHeld {
		c := p.held.oldest()
		if c == nil {
			return
		}
		n := int64(p.held.passOn(c, rss))
		p.held.pop()
		t.undecided[causeBufferFull] += n
		t.held -= n
	}
}
