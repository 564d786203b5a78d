// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepsamplingprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor"

import (
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/pdatautil"
	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

type placeKind uint8

const (
	placeNone    placeKind = iota // not placed yet
	placeOutside                  // belongs to no step: passed untouched
	placeInStep                   // tied to a rank step of the batch
	placeHold                     // its step span has not come yet
)

// spanPlace is where a span of the batch belongs.
type spanPlace struct {
	kind placeKind
	step int32 // index in batch.steps, with placeInStep
}

// rankStepKey names one rank's step.
type rankStepKey struct {
	rank      steps.Rank
	iteration int64
}

// rankDecision is the decision on one rank's step with spans in the batch
// (or held spans resolved in it): keep or drop, and why.
type rankDecision struct {
	key            rankStepKey
	runID          string
	err, straggler bool
	keep           bool
	reason         keepReason
}

// resolvedRef is a span of a held chunk decided in this batch.
type resolvedRef struct {
	ref   heldRef
	place spanPlace
	// held: the span was held (and counted so); otherwise it arrived with
	// this batch in a resource moved out whole because other spans wait.
	held bool
}

// batch is the scratch space of one ConsumeTraces call, reused under mu.
type batch struct {
	ids []rankIdentity
	// spans and places list the spans of the resources with a rank, in
	// order.
	spans    []ptrace.Span
	places   []spanPlace
	steps    []rankDecision
	stepIdx  map[rankStepKey]int32
	lastStep int32
	// The spans of the batch whose step is not known so far: a list per
	// rank, from its head (an index into spans) through next, -1 ending it.
	pendingHead map[steps.Rank]int32
	pendingNext []int32
	resolved    []resolvedRef
	mover       pdatautil.SpanMover[*heldChunk]
}

func newBatch() *batch {
	return &batch{stepIdx: make(map[rankStepKey]int32), pendingHead: make(map[steps.Rank]int32), mover: pdatautil.NewSpanMover[*heldChunk]()}
}

func (b *batch) reset() {
	clear(b.ids)
	b.ids = b.ids[:0]
	clear(b.spans)
	b.spans = b.spans[:0]
	b.places = b.places[:0]
	clear(b.steps)
	b.steps = b.steps[:0]
	clear(b.stepIdx)
	b.lastStep = -1
	clear(b.pendingHead)
	b.pendingNext = b.pendingNext[:0]
	clear(b.resolved)
	b.resolved = b.resolved[:0]
}

// inStep ties a span to its rank step and notes whether the span makes the
// step one that is always kept.
func (b *batch) inStep(id rankIdentity, iteration int64, s ptrace.Span) spanPlace {
	key := rankStepKey{rank: id.key, iteration: iteration}
	idx := b.lastStep
	if idx < 0 || b.steps[idx].key != key {
		var ok bool
		if idx, ok = b.stepIdx[key]; !ok {
			idx = int32(len(b.steps))
			b.steps = append(b.steps, rankDecision{key: key, runID: id.runID})
			b.stepIdx[key] = idx
		}
		b.lastStep = idx
	}
	st := &b.steps[idx]
	if !st.err && isError(s) {
		st.err = true
	}
	if !st.straggler && isStraggler(s) {
		st.straggler = true
	}
	return spanPlace{kind: placeInStep, step: idx}
}

// placeBatch places every span of the batch: a step span is its own step;
// another span is in the step of its rank that covers its start time, or
// outside every step, or held for a step span still to come.
func (p *stepSamplingProcessor) placeBatch(rss ptrace.ResourceSpansSlice, b *batch) {
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		id := p.reader.identify(rs.Resource().Attributes())
		b.ids = append(b.ids, id)
		if id.ok {
			p.placeResource(id, rs, b)
		}
	}
}

// placeResource works through the resource's spans in order. Spans end,
// and so are exported, children first: a step's spans come before its step
// span. So each step span is recorded before the spans preceding it are
// placed; that way a batch holding many steps of a rank places each span
// while its step is among the few the timeline remembers.
func (p *stepSamplingProcessor) placeResource(id rankIdentity, rs ptrace.ResourceSpans, b *batch) {
	base := len(b.spans)
	sss := rs.ScopeSpans()
	for i := 0; i < sss.Len(); i++ {
		spans := sss.At(i).Spans()
		for j := 0; j < spans.Len(); j++ {
			b.spans = append(b.spans, spans.At(j))
		}
	}
	b.places = slices.Grow(b.places, len(b.spans)-base)[:len(b.spans)]
	clear(b.places[base:])
	b.pendingNext = slices.Grow(b.pendingNext, len(b.spans)-base)[:len(b.spans)]
	// The rank's timeline, looked up once for all its spans.
	tl := p.placer.Rank(id.key)
	seg := base
	for f := base; f < len(b.spans); f++ {
		s := b.spans[f]
		if !p.spans.IsStep(s.Name()) {
			continue
		}
		iteration, ok := p.spans.Iteration(s)
		if !ok {
			// Not a usable step span: it passes as a span outside steps.
			b.places[f] = spanPlace{kind: placeOutside}
			continue
		}
		p.stepSeen = true
		tl.Add(iteration, steps.Nanos(s.StartTimestamp()), steps.Nanos(s.EndTimestamp()))
		b.places[f] = b.inStep(id, iteration, s)
		p.resolveRank(id, tl, b)
		for ; seg < f; seg++ {
			b.placeSpan(id, tl, seg)
		}
		seg = f + 1
	}
	for ; seg < len(b.spans); seg++ {
		b.placeSpan(id, tl, seg)
	}
}

// placeSpan places span f of the batch, not a usable step span, in its
// rank's step or outside every step, or holds it for its step span.
func (b *batch) placeSpan(id rankIdentity, tl *stepbusy.RankSteps, f int) {
	if b.places[f].kind != placeNone {
		return
	}
	s := b.spans[f]
	iteration, where := steps.Where(tl, s)
	switch where {
	case stepbusy.InStep:
		b.places[f] = b.inStep(id, iteration, s)
	case stepbusy.Outside:
		b.places[f] = spanPlace{kind: placeOutside}
	default:
		b.places[f] = spanPlace{kind: placeHold}
		b.pendingNext[f] = -1
		if head, ok := b.pendingHead[id.key]; ok {
			b.pendingNext[f] = head
		}
		b.pendingHead[id.key] = int32(f)
	}
}

// resolveRank places again, after a new step span of the rank, the rank's
// spans that wait for their step: held from earlier batches, and pending
// in this one.
func (p *stepSamplingProcessor) resolveRank(id rankIdentity, tl *stepbusy.RankSteps, b *batch) {
	if rh := p.held.byRank[id.key]; rh != nil && len(rh.refs) > 0 {
		left := rh.refs[:0]
		for _, r := range rh.refs {
			s := r.Span
			iteration, where := tl.Place(steps.Nanos(s.StartTimestamp()))
			switch where {
			case stepbusy.InStep:
				b.resolved = append(b.resolved, resolvedRef{ref: r, place: b.inStep(r.Chunk.ID, iteration, s), held: true})
			case stepbusy.Outside:
				b.resolved = append(b.resolved, resolvedRef{ref: r, place: spanPlace{kind: placeOutside}, held: true})
			default:
				left = append(left, r)
			}
		}
		clear(rh.refs[len(left):])
		rh.refs = left
	}
	head, ok := b.pendingHead[id.key]
	if !ok {
		return
	}
	left := int32(-1)
	for f := head; f >= 0; {
		next := b.pendingNext[f]
		s := b.spans[f]
		iteration, where := tl.Place(steps.Nanos(s.StartTimestamp()))
		switch where {
		case stepbusy.InStep:
			b.places[f] = b.inStep(id, iteration, s)
		case stepbusy.Outside:
			b.places[f] = spanPlace{kind: placeOutside}
		default:
			b.pendingNext[f] = left
			left = f
		}
		f = next
	}
	if left < 0 {
		delete(b.pendingHead, id.key)
	} else {
		b.pendingHead[id.key] = left
	}
}

// isError: status ERROR, or force-closed at shutdown (nemo.span.truncated).
func isError(s ptrace.Span) bool {
	if s.Status().Code() == ptrace.StatusCodeError {
		return true
	}
	return pdatautil.Truncated(s)
}

// isStraggler: rank_strategy kept the span's step as a straggler.
func isStraggler(s ptrace.Span) bool {
	v, ok := s.Attributes().Get(attrkey.KeptReason)
	return ok && v.Type() == pcommon.ValueTypeStr && v.Str() == reasonStraggler.String()
}
