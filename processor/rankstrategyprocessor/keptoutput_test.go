// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// Kept spans come out under a copy of their resource and scope, one resource
// per chunk and one scope per source scope, marked with the reason and the
// rounded scores.
func TestKeptOutputGroupsByChunkAndScope(t *testing.T) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutInt("nv.dl.rank", 3)
	for _, scope := range []string{"a", "b"} {
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName(scope)
		for _, name := range []string{scope + "1", scope + "2"} {
			ss.Spans().AppendEmpty().SetName(name)
		}
	}
	chunk := steps.NewChunk(rs, rankID{rank: 3}, 0)
	src := chunk.RS.ScopeSpans()
	held := []heldSpan{
		chunk.Hold(2, 1, src.At(1).Spans().At(0)),
		chunk.Hold(1, 0, src.At(0).Spans().At(1)),
		chunk.Hold(3, 1, src.At(1).Spans().At(1)),
	}
	chunk.Placed()
	o := newKeptOutput()
	score := stepbusy.Score{Rank: 3, Relative: 1.0 / 3, Individual: 0.66666}
	assert.False(t, o.add(held[0], score))
	assert.False(t, o.add(held[1], score))
	assert.True(t, o.add(held[2], score), "the chunk's last held span")

	out, n := o.take()
	require.Equal(t, 3, n)
	require.Equal(t, 1, out.ResourceSpans().Len())
	got := out.ResourceSpans().At(0)
	rank, _ := got.Resource().Attributes().Get("nv.dl.rank")
	assert.Equal(t, int64(3), rank.Int())
	require.Equal(t, 2, got.ScopeSpans().Len())
	assert.Equal(t, "b", got.ScopeSpans().At(0).Scope().Name())
	assert.Equal(t, 2, got.ScopeSpans().At(0).Spans().Len())
	assert.Equal(t, "a", got.ScopeSpans().At(1).Scope().Name())
	s := got.ScopeSpans().At(1).Spans().At(0)
	assert.Equal(t, "a2", s.Name())
	attrs := s.Attributes().AsRaw()
	assert.Equal(t, map[string]any{attrkey.KeptReason: "straggler", attrkey.RelativeScore: 0.333, attrkey.IndividualScore: 0.667}, attrs)

	_, n = o.take()
	assert.Zero(t, n, "take empties the output")
}
