// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepsamplingprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor"

import (
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/pdatautil"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// batch is what one ConsumeTraces call learns from the engine, decided and
// carried out once the batch is walked (decide.go). It is reused under the
// engine's lock.
type batch struct {
	resources []resourceRec
	// spans are the placed spans of the resources with a rank, resource by
	// resource.
	spans []spanRec
	// steps are the rank steps the batch's spans belong to.
	steps    []rankDecision
	stepIdx  map[rankStepKey]int32
	lastStep int32
	// resolved are spans that waited for their step span, from earlier
	// batches, placed now or given up.
	resolved []resolvedRec
	mover    pdatautil.SpanMover[*steps.Chunk]
}

// resourceRec is one resource of the batch.
type resourceRec struct {
	rs ptrace.ResourceSpans
	// ok: it has a usable rank; runID is the run the sample hashes.
	ok    bool
	runID string
	// spans[first:last] are its placed spans.
	first, last int
	// chunk holds the resource, moved out of the batch by the engine
	// (Batch.Watch), when some of its spans wait for their step span: its
	// other spans are held too until they are decided, then moved back into
	// the batch or let go.
	chunk *steps.Chunk
}

type placeKind uint8

const (
	placeOutside placeKind = iota // belongs to no step: kept untouched
	placeInStep                   // in a rank step of the batch
)

// spanRec is a placed span of the batch; ref.Held is the span in its
// resource's chunk, when the resource left the batch.
type spanRec struct {
	ref  steps.SpanRef
	kind placeKind
	step int32 // index in steps, with placeInStep
}

// resolvedRec is a span that waited, with its place.
type resolvedRec struct {
	held steps.Held
	kind placeKind
	step int32
}

// rankStepKey names one rank's step.
type rankStepKey struct {
	rank      steps.Rank
	iteration int64
}

// rankDecision is the decision on one rank's step with spans in the batch
// (or spans that waited resolved in it): keep or drop, and why.
type rankDecision struct {
	key            rankStepKey
	runID          string
	err, straggler bool
	keep           bool
	reason         keepReason
}

func newBatch() batch {
	return batch{stepIdx: make(map[rankStepKey]int32), mover: pdatautil.NewSpanMover[*steps.Chunk]()}
}

// reset starts a batch.
func (b *batch) reset(ptrace.ResourceSpansSlice) {
	clear(b.resources)
	b.resources = b.resources[:0]
	clear(b.spans)
	b.spans = b.spans[:0]
	clear(b.steps)
	b.steps = b.steps[:0]
	clear(b.stepIdx)
	b.lastStep = -1
	clear(b.resolved)
	b.resolved = b.resolved[:0]
}

// begin starts a resource of the batch; end closes it.
func (b *batch) begin(rs ptrace.ResourceSpans, ok bool, runID string) {
	b.resources = append(b.resources, resourceRec{rs: rs, ok: ok, runID: runID, first: len(b.spans)})
}

func (b *batch) end() {
	b.cur().last = len(b.spans)
}

// cur is the resource being walked.
func (b *batch) cur() *resourceRec { return &b.resources[len(b.resources)-1] }

// inStep ties a span to its rank step and notes whether the span makes the
// step one that is always kept.
func (b *batch) inStep(key rankStepKey, runID string, s ptrace.Span) int32 {
	idx := b.lastStep
	if idx < 0 || b.steps[idx].key != key {
		var ok bool
		if idx, ok = b.stepIdx[key]; !ok {
			idx = int32(len(b.steps))
			b.steps = append(b.steps, rankDecision{key: key, runID: runID})
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
	return idx
}

// Placed records a span of the resource being walked, placed: held when
// the resource left its batch (some of its spans wait for their step span).
func (p *stepSamplingProcessor) Placed(r *steps.Resource, ref steps.SpanRef, at steps.Placement[none]) {
	b := &p.b
	rec := spanRec{ref: ref, kind: placeOutside}
	if at.InStep() {
		rec.kind = placeInStep
		rec.step = b.inStep(rankStepKey{rank: r.Rank, iteration: at.Iteration}, b.cur().runID, ref.Span)
	}
	b.spans = append(b.spans, rec)
}

// Resolved: a span that waited is placed now, with a step span of this
// batch, or gave up waiting (passed on undecided).
func (p *stepSamplingProcessor) Resolved(rank steps.Rank, h steps.Held, at steps.Placement[none]) {
	rec := resolvedRec{held: h, kind: placeOutside}
	switch {
	case at.Kind == steps.KindExpired:
		p.passUndecided(h, causeOf(at.Expiry))
		return
	case at.InStep():
		rec.kind = placeInStep
		rec.step = p.b.inStep(rankStepKey{rank: rank, iteration: at.Iteration}, p.b.cur().runID, h.Span())
	}
	p.b.resolved = append(p.b.resolved, rec)
}

func causeOf(e steps.Expiry) undecidedCause {
	switch e {
	case steps.ExpiredBudget:
		return causeBufferFull
	case steps.ExpiredShutdown:
		return causeShutdown
	default:
		return causeWaitExpired
	}
}
