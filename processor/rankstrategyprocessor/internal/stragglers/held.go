// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stragglers // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor/internal/stragglers"

import (
	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// heldSteps are the spans the dropped ranks hold in the open steps, until
// each step's decision.
type heldSteps struct {
	byStep map[steps.Step]*heldStep
	// The rank step last looked up: the spans of a resource mostly belong
	// to one step of one rank.
	lastStep steps.Step
	lastRank int64
	last     *rankHeld
	// hint sizes a rank's span list in a new step: the largest of the last
	// step decided, so that one allocation fits.
	hint int
}

// heldStep is one open step's dropped ranks.
type heldStep struct {
	ranks map[int64]*rankHeld
}

// rankHeld is one dropped rank's spans in an open step; step is its step
// span, when held (for its summary).
type rankHeld struct {
	held []steps.Held
	step steps.Held
	// forwards are the micro-batch forwards of the step (summarize).
	forwards int64
}

func newHeldSteps() heldSteps {
	return heldSteps{byStep: make(map[steps.Step]*heldStep), hint: 8}
}

// rank is a dropped rank's part of an open step, created when new: the
// rank becomes a candidate straggler of the step.
func (h *heldSteps) rank(step steps.Step, rank int64) *rankHeld {
	if h.last != nil && h.lastStep == step && h.lastRank == rank {
		return h.last
	}
	hs := h.byStep[step]
	if hs == nil {
		hs = &heldStep{ranks: make(map[int64]*rankHeld)}
		h.byStep[step] = hs
	}
	rh := hs.ranks[rank]
	if rh == nil {
		rh = &rankHeld{}
		hs.ranks[rank] = rh
	}
	h.lastStep, h.lastRank, h.last = step, rank, rh
	return rh
}

// take removes a decided step's dropped ranks.
func (h *heldSteps) take(step steps.Step) *heldStep {
	hs := h.byStep[step]
	delete(h.byStep, step)
	if h.lastStep == step {
		h.last = nil
	}
	return hs
}

func (h *heldSteps) add(rh *rankHeld, s steps.Held) {
	if rh.held == nil {
		rh.held = make([]steps.Held, 0, h.hint)
	}
	rh.held = append(rh.held, s)
}

// place holds a span of a dropped rank in its open step, or applies the
// decision taken before it came, or lets it go when it belongs to no step.
// s is empty for a span keep_errors passed on: it only makes its rank a
// candidate of its step.
func (b *Buffer) place(rank steps.Rank, s steps.Held, at steps.Placement[decision]) {
	switch {
	case !at.InStep():
		if b.sum != nil && at.Kind == steps.KindOutside && s.Chunk != nil {
			b.sum.phase(rank, s.Span())
		}
		b.drop(s) // outside every step, or its step span never came
	case at.Open:
		rh := b.steps.rank(rank.StepOf(at.Iteration), rank.Rank)
		if s.Chunk == nil {
			return
		}
		if at.Kind == steps.KindStep {
			rh.step = s
			if sr := b.cur.summary; sr != nil {
				rh.forwards = sr.stepForwards
			}
		}
		if at.Decided != nil { // a step reopened by a late rank
			b.t.LateSpans++
			b.t.CacheHits++
		}
		b.steps.add(rh, s)
	default:
		b.follow(s, at.Decided, rank.Rank)
	}
}

// follow applies a decision taken before the span came: dropped, as most
// ranks' steps are, when the decision is forgotten.
func (b *Buffer) follow(s steps.Held, dec *decision, rank int64) {
	if s.Chunk == nil {
		return
	}
	b.t.LateSpans++
	if dec == nil {
		b.drop(s)
		return
	}
	b.t.CacheHits++
	if score, kept := dec.keptScore(rank); kept {
		b.emit(s, score)
		return
	}
	b.drop(s)
}

// emit passes a held span on as kept, at the next tick.
func (b *Buffer) emit(s steps.Held, score stepbusy.Score) {
	emptied := keep(b.out, s, score)
	b.collected++
	b.t.Kept++
	b.t.Held++
	if emptied {
		b.uncount(s.Chunk)
	}
}

// drop lets a span go, if held.
func (b *Buffer) drop(s steps.Held) {
	if s.Chunk == nil {
		return
	}
	b.t.Dropped++
	if s.Release() {
		b.uncount(s.Chunk)
	}
}

// uncount stops counting a chunk that holds nothing any more.
func (b *Buffer) uncount(c *steps.Chunk) {
	b.held -= c.Len()
	b.t.Held -= int64(c.Len())
}

// overBudget: max_buffered_spans bounds the spans held (in chunks and kept
// for the next tick) and, apart, the rank steps and waits of open steps.
func (b *Buffer) overBudget(n steps.Counts) bool {
	return b.held+b.collected > b.maxHeld || n.OpenRankSteps+n.Waits > b.maxHeld
}
