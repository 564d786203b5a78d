// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
)

// TestGoodputIsLive: with goodput at its defaults (a record every 5
// minutes), a run's goodput metrics come at every tick from its first
// decided step on: every category's settled time, the goodput so far and,
// once a checkpoint save settled its step, the straggler's time; the
// record waits for its interval. All four shapes.
func TestGoodputIsLive(t *testing.T) {
	for _, shape := range lensfixture.Shapes {
		t.Run(shape.String(), func(t *testing.T) {
			h := newHarness(t, func(cfg *Config) { cfg.Goodput = createDefaultConfig().(*Config).Goodput })
			logs := new(consumertest.LogsSink)
			h.c.nextLogs = logs
			run := lensfixture.Run{Ranks: lensfixture.Fleet(lensfixture.Rank{Run: "run-live", WorldSize: 4}), Shape: shape}
			run.Compute = func(rank, iteration int64) time.Duration {
				if rank == 1 && iteration == 2 {
					return 3 * lensfixture.DefaultStep.Compute
				}
				return lensfixture.DefaultStep.Compute
			}
			for it := int64(1); it <= 4; it++ {
				h.consume(perRank(run, func(spans ptrace.SpanSlice, rank lensfixture.Rank) {
					run.AppendStep(spans, rank, it)
					if it == 3 { // a save settles the steps before it
						run.AppendCheckpoint(spans, rank, it)
					}
				})())
				h.ticks(1)
			}
			h.ticks(12) // the decision wait and the settling delay

			goodput := pointsNamed(h.points(), "nemo.run.goodput")
			require.NotEmpty(t, goodput, "no goodput before the first record")
			last := goodput[len(goodput)-1].value
			assert.Greater(t, last, 0.0)
			assert.LessOrEqual(t, last, 1.0)
			categories := map[string]bool{}
			for _, p := range pointsNamed(h.points(), "nemo.run.time") {
				categories[p.attrs[attrTimeCategory].(string)] = true
			}
			assert.Len(t, categories, 10, "every category at every tick")
			straggler := pointsNamed(h.points(), "nemo.rank.straggler_time")
			require.NotEmpty(t, straggler)
			assert.Positive(t, straggler[len(straggler)-1].value, "rank 1's straggler time")
			assert.Empty(t, records(logs)[eventGoodput], "the record waits for goodput::interval")

			n := len(goodput)
			h.ticks(3)
			assert.Len(t, pointsNamed(h.points(), "nemo.run.goodput"), n+3, "one point a tick")
		})
	}
}
