// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package steps

import (
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/pdatautil"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/spantest"
)

// heldResource is a resource of two scopes, a and b, with spans a0 a1 and
// b0 b1 b2: chunk numbers 0 to 4.
func heldResource() ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutInt("nv.dl.rank", 3)
	for _, sc := range []struct {
		name string
		n    int
	}{{"a", 2}, {"b", 3}} {
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName(sc.name)
		for i := range sc.n {
			ss.Spans().AppendEmpty().SetName(sc.name + string(rune('0'+i)))
		}
	}
	return td
}

func names(td ptrace.Traces) []string {
	var out []string
	for _, s := range spantest.All(td) {
		out = append(out, s.Name())
	}
	return out
}

// A chunk moves its resource out of the batch; spans released while the
// batch is placed do not free it; the last release after Placed does.
func TestChunkHoldsUntilTheLastSpanIsReleased(t *testing.T) {
	td := heldResource()
	c := NewChunk(td.ResourceSpans().At(0), Rank{}, 0)
	assert.Equal(t, 5, c.Len())
	assert.Equal(t, 0, td.ResourceSpans().At(0).ScopeSpans().Len(), "moved out, not copied")

	a0 := c.Hold(0, 0)
	assert.False(t, a0.Release(), "pinned while its batch is placed: not freed")
	assert.False(t, a0.Release(), "a released span is not released twice")
	b2 := c.Hold(4, 1)
	assert.True(t, b2.IsHeld(), "still holds new spans")
	b0 := c.Hold(2, 1)
	assert.False(t, c.Placed())
	assert.Equal(t, 2, c.Held())

	assert.False(t, b0.Release())
	assert.True(t, b2.Release(), "the last held span frees the chunk")
	assert.False(t, b2.IsHeld())
	assert.Equal(t, 0, c.Held())
	assert.Equal(t, 5, c.Len(), "its size is still known, for the budget")
}

// Placed frees a chunk that holds nothing.
func TestChunkPlacedWithNothingHeld(t *testing.T) {
	c := NewChunk(heldResource().ResourceSpans().At(0), Rank{}, 0)
	assert.True(t, c.Placed())
	assert.False(t, Held{}.IsHeld(), "the zero Held holds nothing")
}

// Kept spans move out under a copy of their resource and scope; PassOn
// passes the rest of the held spans on whole, without the ones let go. A
// packed chunk does the same, decoded again when a span is first moved.
func TestChunkMoveAndPassOn(t *testing.T) {
	for _, packed := range []bool{false, true} {
		t.Run(map[bool]string{false: "decoded", true: "packed"}[packed], func(t *testing.T) {
			c := NewChunk(heldResource().ResourceSpans().At(0), Rank{}, 0)
			a1 := c.Hold(1, 0)
			b0 := c.Hold(2, 1)
			b1 := c.Hold(3, 1)
			b2 := c.Hold(4, 1)
			c.Placed()
			if packed {
				c.Pack()
				require.True(t, c.Packed())
			}

			out := ptrace.NewTraces()
			m := pdatautil.NewSpanMover[*Chunk]()
			m.Reset(out.ResourceSpans())
			moved, emptied := b1.Move(&m)
			assert.False(t, emptied)
			assert.False(t, c.Packed(), "decoded to move a span")
			assert.Equal(t, "b1", moved.Name())
			assert.Equal(t, []string{"b1"}, names(out))
			rank, _ := out.ResourceSpans().At(0).Resource().Attributes().Get("nv.dl.rank")
			assert.Equal(t, int64(3), rank.Int(), "under a copy of its resource")
			assert.Equal(t, "b", out.ResourceSpans().At(0).ScopeSpans().At(0).Scope().Name())

			b0.Release()
			passed := ptrace.NewTraces()
			require.Equal(t, 2, c.PassOn(passed.ResourceSpans()))
			assert.Equal(t, []string{"a1", "b2"}, names(passed), "only what is still held, in order")
			assert.Equal(t, 0, c.Held())
			assert.False(t, a1.IsHeld(), "passed on: no longer held")
			assert.False(t, b2.Release(), "releasing a span passed on does nothing")
		})
	}
}

// A packed chunk whose spans are all let go is freed without being decoded
// again; reading a held span decodes it, whole and unchanged.
func TestPackedChunk(t *testing.T) {
	td := heldResource()
	want := ptrace.NewTraces()
	td.CopyTo(want)
	c := NewChunk(td.ResourceSpans().At(0), Rank{}, 0)
	a0, b2 := c.Hold(0, 0), c.Hold(4, 1)
	c.Pack()
	assert.False(t, c.Packed(), "pinned while its batch is placed: not packed")
	c.Placed()
	c.Pack()
	require.True(t, c.Packed())

	assert.False(t, a0.Release())
	assert.True(t, c.Packed(), "letting a span go does not decode")
	assert.Equal(t, "b2", b2.Span().Name(), "read from the bytes")
	assert.False(t, c.Packed())
	got := ptrace.NewTraces()
	c.ResourceSpans().CopyTo(got.ResourceSpans().AppendEmpty())
	assert.NoError(t, ptracetest.CompareTraces(want, got), "decoded whole and unchanged")
	c.Pack()
	assert.True(t, b2.Release(), "the last span frees it")
	assert.False(t, c.Packed(), "freed: nothing kept")

	empty := NewChunk(heldResource().ResourceSpans().At(0), Rank{}, 0)
	empty.Hold(1, 0).Release()
	empty.Placed()
	empty.Pack()
	assert.False(t, empty.Packed(), "nothing held: freed, not packed")
}
