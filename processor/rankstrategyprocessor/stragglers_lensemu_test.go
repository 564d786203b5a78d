// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/otlpsink"
)

// The emulator's synchronous job, as the SDK exported it, through the
// processor: 16 ranks, rank 5 computes three times as long on iteration 3.
// Exactly rank 5's subtree of iteration 3 is kept beside rank 15, with the
// scores busy time gives: (70ms + 15ms optimizer) / (210ms + 15ms). Both
// step span names, steps under the job span and as trace roots.
func TestStragglersOnEmulatedSynchronousJob(t *testing.T) {
	for _, shape := range lensfixture.Shapes {
		t.Run(shape.String(), func(t *testing.T) {
			checkEmulatedJob(t, func(r *lensemu.Rank) { r.StepSpanName, r.StepsAreRoots = shape.StepName, shape.StepsAreRoots })
		})
	}
}

func checkEmulatedJob(t *testing.T, edit func(*lensemu.Rank)) {
	const worldSize, slowRank, slowIteration = 16, 5, 3
	sink, err := otlpsink.Start(nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sink.Close() })
	ranks := make([]lensemu.Rank, worldSize)
	for i := range ranks {
		ranks[i] = lensemu.Rank{
			Endpoint: strings.TrimPrefix(sink.URL, "http://"), Protocol: lensemu.HTTP,
			RunID: "run-emulated", Rank: i, WorldSize: worldSize, LocalRank: i % 8, Steps: 4,
			NoMetrics: true, NoLogs: true,
		}
		edit(&ranks[i])
	}
	ranks[slowRank].ComputeDuration = func(it int) time.Duration {
		if it == slowIteration {
			return 3 * lensemu.DefaultComputeDuration
		}
		return lensemu.DefaultComputeDuration
	}
	_, err = lensemu.Job(t.Context(), ranks)
	require.NoError(t, err)

	h := newStragglerHarness(t, nil, nil)
	for _, req := range sink.Requests() {
		if req.Signal == otlpsink.Traces {
			h.consume(t, req.Traces)
		}
	}
	h.clock.Advance(time.Second)
	assert.Equal(t, int64(4), h.total(t, "stragglers_steps_decided"), "every step complete, decided at the first tick")

	byRank := map[int64]int{}
	want := score(lensemu.DefaultComputeDuration+lensemu.OptimizerTime, 3*lensemu.DefaultComputeDuration+lensemu.OptimizerTime)
	for _, td := range h.sink.AllTraces() {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			rs := td.ResourceSpans().At(i)
			rank, _ := rs.Resource().Attributes().Get(attrkey.DLRank)
			forEachSpan(rs, func(s ptrace.Span) {
				byRank[rank.Int()]++
				if rank.Int() != slowRank {
					return
				}
				attrs := s.Attributes().AsRaw()
				assert.Equal(t, "straggler", attrs[attrkey.KeptReason], s.Name())
				assert.Equal(t, want, attrs[attrkey.RelativeScore], s.Name())
				assert.Equal(t, want, attrs[attrkey.IndividualScore], s.Name())
			})
		}
	}
	assert.Equal(t, map[int64]int{
		worldSize - 1: lensemu.JobSpans + 4*lensemu.SpansPerStep(2),
		slowRank:      lensemu.SpansPerStep(2),
	}, byRank)
}

func forEachSpan(rs ptrace.ResourceSpans, f func(ptrace.Span)) {
	for i := 0; i < rs.ScopeSpans().Len(); i++ {
		spans := rs.ScopeSpans().At(i).Spans()
		for j := 0; j < spans.Len(); j++ {
			f(spans.At(j))
		}
	}
}
