// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stragglers

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
	"github.com/nemo-lens/otelcol-nemo/internal/stepsummary"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/clocktest"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
)

func TestDecisionKeptScore(t *testing.T) {
	d := &decision{kept: []stepbusy.Score{{Rank: 4, Relative: 0.5, Individual: 0.9}}}
	s, ok := d.keptScore(4)
	assert.True(t, ok)
	assert.Equal(t, 0.5, s.Relative)
	_, ok = d.keptScore(5)
	assert.False(t, ok)
}

// Kept spans leave their chunk under a copy of its resource, one resource
// per chunk and one scope per source scope, marked with the reason and the
// rounded scores.
func TestKeepGroupsByChunkAndScopeAndMarks(t *testing.T) {
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
	chunk := steps.NewChunk(rs, steps.Rank{Rank: 3}, 0)
	held := []steps.Held{
		chunk.Hold(2, 1),
		chunk.Hold(1, 0),
		chunk.Hold(3, 1),
	}
	chunk.Placed()
	sink := new(consumertest.TracesSink)
	out := steps.NewOutput(sink)
	score := stepbusy.Score{Rank: 3, Relative: 1.0 / 3, Individual: 0.66666}
	assert.False(t, keep(out, held[0], score))
	assert.False(t, keep(out, held[1], score))
	assert.True(t, keep(out, held[2], score), "the chunk's last held span")

	require.Equal(t, 3, out.Ready())
	_, err := out.Send(t.Context())
	require.NoError(t, err)
	require.Len(t, sink.AllTraces(), 1)
	got := sink.AllTraces()[0].ResourceSpans()
	require.Equal(t, 1, got.Len())
	rank, _ := got.At(0).Resource().Attributes().Get("nv.dl.rank")
	assert.Equal(t, int64(3), rank.Int())
	scopes := got.At(0).ScopeSpans()
	require.Equal(t, 2, scopes.Len())
	assert.Equal(t, "b", scopes.At(0).Scope().Name())
	assert.Equal(t, 2, scopes.At(0).Spans().Len())
	assert.Equal(t, "a", scopes.At(1).Scope().Name())
	s := scopes.At(1).Spans().At(0)
	assert.Equal(t, "a2", s.Name())
	assert.Equal(t, map[string]any{attrkey.KeptReason: attrkey.KeptStraggler, attrkey.RelativeScore: 0.333, attrkey.IndividualScore: 0.667}, s.Attributes().AsRaw())
}

// The spans held for their step's decision are held packed (a third of the
// memory), except by an agent summarizing, which reads every dropped rank's
// step span at the decision; a straggler's step still leaves whole. A
// synchronous step in all four shapes: rank 2 computes three times as long,
// the others wait for it in grad sync.
func TestHeldChunksArePacked(t *testing.T) {
	const world, slowRank = 4, 2
	for _, shape := range lensfixture.Shapes {
		run := lensfixture.Run{
			Ranks: lensfixture.Fleet(lensfixture.Rank{Run: "run-packed", WorldSize: world, GPUsPerNode: 8}),
			Shape: shape,
			Compute: func(rank, _ int64) time.Duration {
				if rank == slowRank {
					return 3 * lensfixture.DefaultStep.Compute
				}
				return lensfixture.DefaultStep.Compute
			},
		}.Memoized()
		for _, summarize := range []bool{false, true} {
			t.Run(shape.String()+"/"+map[bool]string{false: "retention", true: "summarize"}[summarize], func(t *testing.T) {
				testHeldChunksArePacked(t, run, summarize, slowRank)
			})
		}
	}
}

func testHeldChunksArePacked(t *testing.T, run lensfixture.Run, summarize bool, slowRank int64) {
	clk := clocktest.NewFake()
	sink := new(consumertest.TracesSink)
	b := newBuffer(t, clk, sink, summarize)
	hold := func(ranks ...int64) {
		td := run.Iteration(0)
		require.True(t, b.Consume(t.Context(), func(h *Batch) {
			for _, rs := range td.ResourceSpans().All() {
				if id, _ := testReader.Read(rs.Resource().Attributes()); slices.Contains(ranks, id.Rank.Rank) {
					h.Hold(rs, id, false)
				}
			}
		}))
	}
	hold(0, 1, 2) // rank 3 not yet: the step stays open
	held, packed := 0, 0
	for _, hs := range b.steps.byStep {
		for _, rh := range hs.ranks {
			for _, s := range rh.held {
				held++
				if s.Chunk.Packed() {
					packed++
				}
			}
		}
	}
	require.NotZero(t, held)
	if summarize {
		assert.Zero(t, packed, "summarizing: held decoded")
	} else {
		assert.Equal(t, held, packed, "every held span's chunk is packed")
	}
	hold(3)
	clk.Advance(time.Second) // every rank reported: decided
	require.NoError(t, b.Shutdown())
	kept := 0
	for _, td := range sink.AllTraces() {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				if stepsummary.IsScope(ss) {
					continue
				}
				id, _ := testReader.Read(rs.Resource().Attributes())
				assert.Equal(t, slowRank, id.Rank.Rank)
				kept += ss.Spans().Len()
			}
		}
	}
	assert.Equal(t, run.Iteration(0).ResourceSpans().At(int(slowRank)).ScopeSpans().At(0).Spans().Len(), kept, "the slow rank's step, whole")
}
