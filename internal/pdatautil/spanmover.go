// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package pdatautil // import "github.com/nemo-lens/otelcol-nemo/internal/pdatautil"

import "go.opentelemetry.io/collector/pdata/ptrace"

// SpanMover moves single spans out of source resources into an outgoing
// batch, under a copy of their resource and scope made once per source. The
// span itself is moved, not copied. K identifies a source resource (e.g. a
// pointer to the held chunk that owns it); spans moved from one source
// between two Resets share one outgoing resource.
type SpanMover[K comparable] struct {
	dst      ptrace.ResourceSpansSlice
	bySource map[K]*movedResource
}

type movedResource struct {
	rs ptrace.ResourceSpans
	// scopes maps a scope index in the source to its index in rs, -1 when
	// not created yet.
	scopes []int32
}

// NewSpanMover returns a mover; Reset gives it its destination.
func NewSpanMover[K comparable]() SpanMover[K] {
	return SpanMover[K]{bySource: make(map[K]*movedResource)}
}

// Reset starts moving into dst, forgetting the resources made so far.
func (m *SpanMover[K]) Reset(dst ptrace.ResourceSpansSlice) {
	m.dst = dst
	clear(m.bySource)
}

// Move moves span, found in scope index scope of src, into the outgoing
// batch and returns it there; src keeps an empty span in its place.
func (m *SpanMover[K]) Move(key K, src ptrace.ResourceSpans, scope int, span ptrace.Span) ptrace.Span {
	mr := m.bySource[key]
	if mr == nil {
		rs := m.dst.AppendEmpty()
		src.Resource().CopyTo(rs.Resource())
		rs.SetSchemaUrl(src.SchemaUrl())
		mr = &movedResource{rs: rs, scopes: make([]int32, src.ScopeSpans().Len())}
		for i := range mr.scopes {
			mr.scopes[i] = -1
		}
		m.bySource[key] = mr
	}
	si := mr.scopes[scope]
	if si < 0 {
		from := src.ScopeSpans().At(scope)
		ss := mr.rs.ScopeSpans().AppendEmpty()
		from.Scope().CopyTo(ss.Scope())
		ss.SetSchemaUrl(from.SchemaUrl())
		si = int32(mr.rs.ScopeSpans().Len() - 1)
		mr.scopes[scope] = si
	}
	dst := mr.rs.ScopeSpans().At(int(si)).Spans().AppendEmpty()
	span.MoveTo(dst)
	return dst
}
