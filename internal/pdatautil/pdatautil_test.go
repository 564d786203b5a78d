// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package pdatautil

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
)

func TestCounts(t *testing.T) {
	rs := ptrace.NewResourceSpans()
	rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	ss := rs.ScopeSpans().AppendEmpty().Spans()
	ss.AppendEmpty()
	ss.AppendEmpty()
	assert.Equal(t, 3, CountSpans(rs))

	rl := plog.NewResourceLogs()
	rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	rl.ScopeLogs().AppendEmpty()
	assert.Equal(t, 1, CountLogRecords(rl))

	rm := pmetric.NewResourceMetrics()
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	ms.AppendEmpty().SetEmptyGauge().DataPoints().AppendEmpty()
	sum := ms.AppendEmpty().SetEmptySum().DataPoints()
	sum.AppendEmpty()
	sum.AppendEmpty()
	ms.AppendEmpty().SetEmptyHistogram().DataPoints().AppendEmpty()
	ms.AppendEmpty().SetEmptyExponentialHistogram().DataPoints().AppendEmpty()
	ms.AppendEmpty().SetEmptySummary().DataPoints().AppendEmpty()
	ms.AppendEmpty()
	assert.Equal(t, 6, CountDataPoints(rm))
}

// Spans moved from one source share one copy of its resource, and one copy
// of each of its scopes, in the order they were first needed.
func TestSpanMoverGroupsBySourceAndScope(t *testing.T) {
	src := ptrace.NewResourceSpans()
	src.SetSchemaUrl("https://schema/r")
	src.Resource().Attributes().PutInt("nv.dl.rank", 3)
	for _, scope := range []string{"a", "b"} {
		ss := src.ScopeSpans().AppendEmpty()
		ss.Scope().SetName(scope)
		ss.SetSchemaUrl("https://schema/" + scope)
		for _, name := range []string{scope + "1", scope + "2"} {
			ss.Spans().AppendEmpty().SetName(name)
		}
	}
	other := ptrace.NewResourceSpans()
	other.ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("o1")

	td := ptrace.NewTraces()
	m := NewSpanMover[int]()
	m.Reset(td.ResourceSpans())
	moved := m.Move(1, src, 1, src.ScopeSpans().At(1).Spans().At(0))
	assert.Equal(t, "b1", moved.Name())
	m.Move(1, src, 0, src.ScopeSpans().At(0).Spans().At(1))
	m.Move(2, other, 0, other.ScopeSpans().At(0).Spans().At(0))
	m.Move(1, src, 1, src.ScopeSpans().At(1).Spans().At(1))

	require.Equal(t, 2, td.ResourceSpans().Len())
	got := td.ResourceSpans().At(0)
	assert.Equal(t, "https://schema/r", got.SchemaUrl())
	assert.Equal(t, map[string]any{"nv.dl.rank": int64(3)}, got.Resource().Attributes().AsRaw())
	require.Equal(t, 2, got.ScopeSpans().Len())
	b := got.ScopeSpans().At(0)
	assert.Equal(t, "b", b.Scope().Name())
	assert.Equal(t, "https://schema/b", b.SchemaUrl())
	require.Equal(t, 2, b.Spans().Len())
	assert.Equal(t, "b1", b.Spans().At(0).Name())
	assert.Equal(t, "b2", b.Spans().At(1).Name())
	assert.Equal(t, "a2", got.ScopeSpans().At(1).Spans().At(0).Name())
	assert.Equal(t, "o1", td.ResourceSpans().At(1).ScopeSpans().At(0).Spans().At(0).Name())
	assert.Empty(t, src.ScopeSpans().At(1).Spans().At(0).Name(), "the span is moved, not copied")

	next := ptrace.NewTraces()
	m.Reset(next.ResourceSpans())
	m.Move(1, src, 0, src.ScopeSpans().At(0).Spans().At(0))
	assert.Equal(t, 1, next.ResourceSpans().Len(), "after Reset a source gets a new resource in the new batch")
	assert.Equal(t, 2, td.ResourceSpans().Len())
}

func TestTruncated(t *testing.T) {
	s := ptrace.NewSpan()
	assert.False(t, Truncated(s), "no attribute")
	for v, want := range map[any]bool{true: true, "true": true, false: false, "false": false, "TRUE": false, int64(1): false} {
		require.NoError(t, s.Attributes().FromRaw(map[string]any{attrkey.SpanTruncated: v}))
		assert.Equal(t, want, Truncated(s), "%v", v)
	}
}
