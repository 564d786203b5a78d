// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepsamplingprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor"

import (
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// heldChunk is one resource's spans from one batch, moved out of the batch
// whole because some of them wait for their step span (steps.Chunk). A
// held span leaves when its step is decided (kept ones are moved into an
// outgoing batch) or when the chunk is passed on undecided.
type heldChunk = steps.Chunk[rankIdentity]

// heldRef is one held span.
type heldRef = steps.Held[rankIdentity]

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

// add queues a chunk some of whose spans are held.
func (h *heldStore) add(c *heldChunk) {
	h.queue = append(h.queue, c)
}

// rank is the list of a rank's held spans, created when new.
func (h *heldStore) rank(key steps.Rank) *rankHeld {
	rh := h.byRank[key]
	if rh == nil {
		rh = &rankHeld{}
		h.byRank[key] = rh
	}
	rh.idle = false
	return rh
}

// hold lists a held span under its rank.
func (h *heldStore) hold(rh *rankHeld, r heldRef) {
	rh.refs = append(rh.refs, r)
	h.count++
}

// settle lets a held span go once decided; the caller has taken it out of
// byRank, and moved it on first if kept.
func (h *heldStore) settle(r heldRef) {
	r.Release()
	h.count--
}

// oldest returns the oldest chunk that still holds spans, nil when none.
func (h *heldStore) oldest() *heldChunk {
	for h.head < len(h.queue) {
		if c := h.queue[h.head]; c.Held() > 0 {
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
	h.forget(c)
	n := c.PassOn(dst)
	h.count -= n
	return n
}

// forget removes a chunk's spans from its rank's list.
func (h *heldStore) forget(c *heldChunk) {
	rh := h.byRank[c.ID.key]
	if rh == nil {
		return
	}
	kept := rh.refs[:0]
	for _, r := range rh.refs {
		if r.Chunk != c {
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
