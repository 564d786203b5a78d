// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package steps // import "github.com/nemo-lens/otelcol-nemo/internal/steps"

import (
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/pdatautil"
)

// Chunk is one resource's spans from one batch, moved out of the batch
// whole (no copy) because some of them wait: for their step span, or for
// their step's decision. Its spans stay in place and are referenced by
// Held; a held span leaves when it is released: moved on (Move) or let go.
// A chunk with nothing held is freed; until then the whole resource is in
// memory, so a component's budget counts all its spans (Len). A new chunk
// is pinned until Placed, so that spans released while its batch is placed
// do not free it early. Rank is the resource's rank. Not safe for
// concurrent use.
type Chunk struct {
	RS      ptrace.ResourceSpans
	Rank    Rank
	Arrival time.Duration
	spans   int
	// held has a bit per span of RS, in order: still held.
	held   []uint64
	count  int
	pinned bool
}

// NewChunk moves rs out of its batch into a pinned chunk that arrived at
// arrival; no span is held yet.
func NewChunk(rs ptrace.ResourceSpans, rank Rank, arrival time.Duration) *Chunk {
	c := &Chunk{RS: ptrace.NewResourceSpans(), Rank: rank, Arrival: arrival, pinned: true}
	rs.MoveTo(c.RS)
	c.spans = pdatautil.CountSpans(c.RS)
	c.held = make([]uint64, (c.spans+63)/64)
	return c
}

// Len is the number of spans in the chunk, held or not.
func (c *Chunk) Len() int { return c.spans }

// Held is the number of spans still held.
func (c *Chunk) Held() int { return c.count }

// Placed unpins the chunk once its batch is placed. It reports whether
// nothing is held, and then frees the chunk.
func (c *Chunk) Placed() (emptied bool) {
	c.pinned = false
	if c.count == 0 {
		c.free()
		return true
	}
	return false
}

// Hold holds the chunk's span number i (counting scope by scope, in order),
// found in scope index scope.
func (c *Chunk) Hold(i, scope int, span ptrace.Span) Held {
	c.held[i/64] |= 1 << (i % 64)
	c.count++
	return Held{Chunk: c, Span: span, scope: int32(scope), i: int32(i)}
}

// PassOn moves the spans still held into dst, under the chunk's resource
// and scopes, leaving out the others, and frees the chunk. It returns how
// many spans it passed on.
func (c *Chunk) PassOn(dst ptrace.ResourceSpansSlice) int {
	n := c.count
	if n == 0 {
		c.pinned = false
		c.free()
		return 0
	}
	if n < c.spans {
		i := 0
		c.RS.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
			ss.Spans().RemoveIf(func(ptrace.Span) bool {
				gone := c.held[i/64]&(1<<(i%64)) == 0
				i++
				return gone
			})
			return ss.Spans().Len() == 0
		})
	}
	c.RS.MoveTo(dst.AppendEmpty())
	c.count = 0
	c.free()
	return n
}

// free lets go of the resource once nothing in it is held.
func (c *Chunk) free() {
	c.RS = ptrace.ResourceSpans{}
	c.held = nil
	c.pinned = false
}

// Held is one held span of a chunk.
type Held struct {
	Chunk *Chunk
	Span  ptrace.Span
	scope int32
	i     int32
}

// IsHeld reports whether the span is still held: not released, and its
// chunk not passed on.
func (h Held) IsHeld() bool {
	c := h.Chunk
	return c != nil && c.held != nil && c.held[h.i/64]&(1<<(h.i%64)) != 0
}

// Release lets the span go (dropped, or moved on already). It reports
// whether the chunk, placed, holds nothing more, and then frees it.
// Releasing a span that is not held does nothing.
func (h Held) Release() (emptied bool) {
	if !h.IsHeld() {
		return false
	}
	c := h.Chunk
	c.held[h.i/64] &^= 1 << (h.i % 64)
	c.count--
	if c.count == 0 && !c.pinned {
		c.free()
		return true
	}
	return false
}

// Move moves the span with m into its outgoing batch, under a copy of its
// resource and scope made once per chunk, and releases it. It returns the
// span in the outgoing batch and whether the chunk holds nothing more.
func (h Held) Move(m *pdatautil.SpanMover[*Chunk]) (ptrace.Span, bool) {
	dst := m.Move(h.Chunk, h.Chunk.RS, int(h.scope), h.Span)
	return dst, h.Release()
}
