package stepsamplingprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor"

import "go.opentelemetry.io/collector/pdata/ptrace"

// spanMover moves single spans out of held chunks into an outgoing batch,
// under a copy of their resource and scope made once per chunk. The span
// itself is moved, not copied.
type spanMover struct {
	dst     ptrace.ResourceSpansSlice
	byChunk map[*heldChunk]*movedResource
}

type movedResource struct {
	rs ptrace.ResourceSpans
	// scopes maps a scope index in the chunk to its index in rs, -1 when
	// not created yet.
	scopes []int32
}

func newSpanMover() spanMover {
	return spanMover{byChunk: make(map[*heldChunk]*movedResource)}
}

// reset starts moving into dst.
func (m *spanMover) reset(dst ptrace.ResourceSpansSlice) {
	m.dst = dst
	clear(m.byChunk)
}

// move moves the span out of its chunk into the outgoing batch and returns
// it there; the chunk keeps an empty span in its place.
func (m *spanMover) move(r heldRef) ptrace.Span {
	c := r.chunk
	mr := m.byChunk[c]
	if mr == nil {
		rs := m.dst.AppendEmpty()
		c.rs.Resource().CopyTo(rs.Resource())
		rs.SetSchemaUrl(c.rs.SchemaUrl())
		mr = &movedResource{rs: rs, scopes: make([]int32, c.rs.ScopeSpans().Len())}
		for i := range mr.scopes {
			mr.scopes[i] = -1
		}
		m.byChunk[c] = mr
	}
	cs := c.spans[r.i]
	si := mr.scopes[cs.scope]
	if si < 0 {
		src := c.rs.ScopeSpans().At(int(cs.scope))
		ss := mr.rs.ScopeSpans().AppendEmpty()
		src.Scope().CopyTo(ss.Scope())
		ss.SetSchemaUrl(src.SchemaUrl())
		si = int32(mr.rs.ScopeSpans().Len() - 1)
		mr.scopes[cs.scope] = si
	}
	dst := mr.rs.ScopeSpans().At(int(si)).Spans().AppendEmpty()
	cs.span.MoveTo(dst)
	return dst
}
