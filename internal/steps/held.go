// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package steps // import "github.com/nemo-lens/otelcol-nemo/internal/steps"

import (
	"fmt"
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
// do not free it early. A holder whose spans mostly wait to be let go unread
// packs its chunks (Pack). Rank is the resource's rank. Not safe for
// concurrent use.
type Chunk struct {
	Rank    Rank
	Arrival time.Duration
	rs      ptrace.ResourceSpans
	// packed is the resource as OTLP/protobuf while the chunk is packed;
	// rs is then empty.
	packed []byte
	spans  int
	// starts has the chunk number of each scope's first span.
	starts []int32
	// held has a bit per span of rs, in order: still held.
	held   []uint64
	count  int
	pinned bool
}

// NewChunk moves rs out of its batch into a pinned chunk that arrived at
// arrival; no span is held yet.
func NewChunk(rs ptrace.ResourceSpans, rank Rank, arrival time.Duration) *Chunk {
	c := &Chunk{rs: ptrace.NewResourceSpans(), Rank: rank, Arrival: arrival, pinned: true}
	rs.MoveTo(c.rs)
	scopes := c.rs.ScopeSpans()
	c.starts = make([]int32, scopes.Len())
	for i := range scopes.Len() {
		c.starts[i] = int32(c.spans)
		c.spans += scopes.At(i).Spans().Len()
	}
	c.held = make([]uint64, (c.spans+63)/64)
	return c
}

// Len is the number of spans in the chunk, held or not.
func (c *Chunk) Len() int { return c.spans }

// Held is the number of spans still held.
func (c *Chunk) Held() int { return c.count }

// ResourceSpans is the chunk's resource and its spans, decoded again first
// when the chunk is packed.
func (c *Chunk) ResourceSpans() ptrace.ResourceSpans {
	if c.packed != nil {
		td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(c.packed)
		if err != nil || td.ResourceSpans().Len() != 1 {
			// The bytes are pdata's own encoding of this resource, which
			// pdata always decodes: only a bug gets here.
			panic(fmt.Sprintf("steps: a packed chunk does not decode (%v): a bug, please report it", err))
		}
		c.rs, c.packed = td.ResourceSpans().At(0), nil
	}
	return c.rs
}

// Pack keeps the resource of a placed chunk that still holds spans as
// OTLP/protobuf until one of them is read or moved (Held.Span, Move,
// PassOn), which decodes it again, once. Encoded, a Lens-shaped span takes
// about a third of its memory as pdata and, being bytes, costs the garbage
// collector no scanning. It suits a holder whose spans mostly wait for their
// step's decision and are then let go unread (straggler retention: every
// rank's but the stragglers'): a wave of held steps takes a third of the
// memory. Encoding costs about a fifth of what decoding the span cost on
// arrival.
func (c *Chunk) Pack() {
	if c.pinned || c.count == 0 || c.packed != nil {
		return
	}
	td := ptrace.NewTraces()
	c.rs.MoveTo(td.ResourceSpans().AppendEmpty())
	b, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		td.ResourceSpans().At(0).MoveTo(c.rs) // stays decoded
		return
	}
	c.packed, c.rs = b, ptrace.ResourceSpans{}
}

// Packed reports whether the chunk is packed (Pack).
func (c *Chunk) Packed() bool { return c.packed != nil }

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
func (c *Chunk) Hold(i, scope int) Held {
	c.held[i/64] |= 1 << (i % 64)
	c.count++
	return Held{Chunk: c, scope: int32(scope), i: int32(i)}
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
	rs := c.ResourceSpans()
	if n < c.spans {
		i := 0
		rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
			ss.Spans().RemoveIf(func(ptrace.Span) bool {
				gone := c.held[i/64]&(1<<(i%64)) == 0
				i++
				return gone
			})
			return ss.Spans().Len() == 0
		})
	}
	rs.MoveTo(dst.AppendEmpty())
	c.count = 0
	c.free()
	return n
}

// free lets go of the resource once nothing in it is held.
func (c *Chunk) free() {
	c.rs, c.packed = ptrace.ResourceSpans{}, nil
	c.held = nil
	c.pinned = false
}

// Held is one held span of a chunk.
type Held struct {
	Chunk *Chunk
	scope int32
	i     int32
}

// Span is the held span; reading it decodes a packed chunk again.
func (h Held) Span() ptrace.Span {
	c := h.Chunk
	return c.ResourceSpans().ScopeSpans().At(int(h.scope)).Spans().At(int(h.i - c.starts[h.scope]))
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
	dst := m.Move(h.Chunk, h.Chunk.ResourceSpans(), int(h.scope), h.Span())
	return dst, h.Release()
}
