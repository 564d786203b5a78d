// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepsamplingprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor"

import (
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// heldChunk is one resource's spans from one batch, moved out of the batch
// whole (no copy) because some of them wait for their step span. Its spans
// stay in place: a held one leaves when its step is decided (kept ones are
// moved into an outgoing batch) or when the chunk is passed on undecided.
type heldChunk struct {
	rs      ptrace.ResourceSpans
	id      rankIdentity
	arrival time.Duration
	// spans lists every span of rs in order (scope by scope).
	spans []chunkSpan
	// pending counts the spans still held.
	pending int
}

type chunkSpan struct {
	span  ptrace.Span
	scope int32
	// held: waiting for its step. Otherwise gone: dropped with its step, or
	// moved on already.
	held bool
}

// heldRef is one held span.
type heldRef struct {
	chunk *heldChunk
	i     int32
}

func (r heldRef) span() ptrace.Span { return r.chunk.spans[r.i].span }

// heldStore holds chunks in arrival order, and every rank's held spans.
// Not safe for concurrent use.
type heldStore struct {
	queue []*heldChunk
	head  int
	// byRank lists every held span of a rank, oldest first.
	byRank map[steps.Rank]*rankHeld
	// count is the number of spans held, bounded by max_buffered_spans.
	count int
}

func newHeldStore() heldStore {
	return heldStore{byRank: make(map[steps.Rank]*rankHeld)}
}

// rankHeld is a rank's held spans. A rank's list outlives its spans until
// two sweeps found it empty, so that a rank holding a few spans in every
// batch reuses it.
type rankHeld struct {
	refs []heldRef
	idle bool
}

// add takes over a chunk whose spans are marked held or not.
func (h *heldStore) add(c *heldChunk) {
	h.queue = append(h.queue, c)
	rh := h.byRank[c.id.key]
	if rh == nil {
		rh = &rankHeld{}
		h.byRank[c.id.key] = rh
	}
	rh.idle = false
	rh.refs = slices.Grow(rh.refs, c.pending)
	for i, cs := range c.spans {
		if cs.held {
			rh.refs = append(rh.refs, heldRef{chunk: c, i: int32(i)})
		}
	}
	h.count += c.pending
}

// settle marks a held span decided; the caller has taken it out of byRank,
// and frees the chunk once nothing in it waits (free), after it has moved
// out every kept span of the chunk.
func (h *heldStore) settle(r heldRef) {
	r.chunk.spans[r.i].held = false
	r.chunk.pending--
	h.count--
}

// free lets go of a chunk nothing waits in any more; it stays in the queue
// as an empty shell until its turn.
func (c *heldChunk) free() {
	c.rs = ptrace.ResourceSpans{}
	c.spans = nil
}

// oldest returns the oldest chunk that still holds spans, nil when none.
func (h *heldStore) oldest() *heldChunk {
	for h.head < len(h.queue) {
		if c := h.queue[h.head]; c.pending > 0 {
			return c
		}
		h.queue[h.head] = nil
		h.head++
	}
	h.queue, h.head = h.queue[:0], 0
	return nil
}

// pop removes the chunk oldest returned from the queue, compacting the
// queue once its dead head outgrows the live part.
func (h *heldStore) pop() {
	h.queue[h.head] = nil
	h.head++
	if h.head > len(h.queue)/2 {
		n := copy(h.queue, h.queue[h.head:])
		clear(h.queue[n:])
		h.queue, h.head = h.queue[:n], 0
	}
}

// passOn moves the chunk's held spans, undecided, into dst and forgets the
// chunk. It returns how many spans were passed on.
func (h *heldStore) passOn(c *heldChunk, dst ptrace.ResourceSpansSlice) int {
	n := c.pending
	if n < len(c.spans) {
		k := 0
		c.rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
			ss.Spans().RemoveIf(func(ptrace.Span) bool {
				gone := !c.spans[k].held
				k++
				return gone
			})
			return ss.Spans().Len() == 0
		})
	}
	c.rs.MoveTo(dst.AppendEmpty())
	h.count -= n
	c.pending = 0
	c.free()
	h.forget(c)
	return n
}

// forget removes a chunk's spans from its rank's list.
func (h *heldStore) forget(c *heldChunk) {
	rh := h.byRank[c.id.key]
	if rh == nil {
		return
	}
	kept := rh.refs[:0]
	for _, r := range rh.refs {
		if r.chunk != c {
			kept = append(kept, r)
		}
	}
	clear(rh.refs[len(kept):])
	rh.refs = kept
}

// sweep forgets the lists of ranks that held nothing since the last sweep.
func (h *heldStore) sweep() {
	for key, rh := range h.byRank {
		if len(rh.refs) > 0 {
			continue
		}
		if rh.idle {
			delete(h.byRank, key)
		} else {
			rh.idle = true
		}
	}
}
