// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/nemo-lens/otelcol-nemo/internal/runrecords"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
)

// A run that sends nothing for runIdle is forgotten with everything kept of
// it, after its goodput's last record; seen again, it starts over: its
// straggler count from its new steps, with a new start time. All four
// shapes. (Stall detection is off: a run silent mid-step is a stall, which
// the next test keeps longer.)
func TestAnIdleRunIsForgottenWithAllItKept(t *testing.T) {
	for _, shape := range lensfixture.Shapes {
		t.Run(shape.String(), func(t *testing.T) {
			h := newHarness(t, func(cfg *Config) {
				cfg.Goodput = createDefaultConfig().(*Config).Goodput
				cfg.Stalls = configoptional.None[StallsConfig]()
			})
			logs := new(consumertest.LogsSink)
			h.c.nextLogs = logs
			job := syncJob{run: "run-idle", world: 4, slow: map[int64]int64{2: 1, 6: 1}}
			for it := int64(1); it <= 3; it++ {
				h.consume(job.batch(shape, it, lensfixture.WholeStep, allRanks(4)...))
			}
			h.ticks(12)
			before := pointsNamed(h.points(), runrecords.StepStragglers)
			require.NotEmpty(t, before)
			first := before[len(before)-1]
			assert.InDelta(t, 1.0, first.value, 0, "iteration 2's slow rank")
			require.Len(t, h.c.runs.runs, 1)
			assert.Empty(t, records(logs)[eventGoodput], "the record waits for goodput::interval")

			h.clk.Advance(runIdle - 13*time.Second) // its last span came 12 s ago
			assert.Len(t, h.c.runs.runs, 1, "not idle for longer than runIdle yet")
			h.ticks(2)
			assert.Empty(t, h.c.runs.runs, "forgotten")
			assert.Zero(t, h.c.runs.rankLabels, "with its ranks")
			goodputs := records(logs)[eventGoodput]
			require.NotEmpty(t, goodputs)
			isFinal, _ := goodputs[len(goodputs)-1].Attributes().Get(attrGoodputFinal)
			assert.True(t, isFinal.Bool(), "its last goodput, before it was forgotten")

			for it := int64(5); it <= 7; it++ {
				h.consume(job.batch(shape, it, lensfixture.WholeStep, allRanks(4)...))
			}
			h.ticks(12)
			after := pointsNamed(h.points(), runrecords.StepStragglers)[len(before):]
			require.NotEmpty(t, after)
			again := after[len(after)-1]
			assert.InDelta(t, 1.0, again.value, 0, "counted over from iteration 5: iteration 6's slow rank")
			assert.Greater(t, again.start, first.start, "a new start time")
		})
	}
}

// A stalled run is kept past runIdle, its stall reported at every tick,
// until it resumes or has been silent for stalledRunIdle.
func TestAStalledRunIsKeptPastIdle(t *testing.T) {
	for _, shape := range lensfixture.Shapes {
		t.Run(shape.String(), func(t *testing.T) {
			h, logs := stallHarness(t)
			job := hangRank5(h, shape)
			h.ticks(8)
			require.Len(t, records(logs)[eventStalled], 1)

			h.clk.Advance(2 * runIdle)
			h.ticks(1)
			require.Len(t, h.c.runs.runs, 1, "kept while stalled")
			stalled := pointsNamed(h.points(), "nemo.run.stalled")
			last := stalled[len(stalled)-1]
			assert.InDelta(t, 1.0, last.value, 0)
			assert.Equal(t, pcommon.NewTimestampFromTime(h.clk.Now()), last.ts, "still reported")

			h.consume(job.batch(shape, 5, lensfixture.WholeStep, allRanks(8)...))
			h.ticks(2)
			assert.Len(t, records(logs)[eventResumed], 1)

			// Stalled again, then silent for a day: forgotten.
			h.consume(hung(job.fixture(shape), map[int64]lensfixture.HangRole{5: lensfixture.Stopped})())
			h.ticks(8)
			require.Len(t, records(logs)[eventStalled], 2)
			h.clk.Advance(stalledRunIdle - time.Minute)
			require.Len(t, h.c.runs.runs, 1)
			h.clk.Advance(2 * time.Minute)
			assert.Empty(t, h.c.runs.runs)
		})
	}
}

// Past maxRememberedRuns, the runs silent the longest are forgotten first,
// with their ranks.
func TestRunsPastTheBoundGoSilentFirst(t *testing.T) {
	runs := newRunTable(createDefaultConfig().(*Config))
	t0 := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	attrs := pcommon.NewMap()
	for i := range maxRememberedRuns + 2 {
		r := &steps.Resource{
			Identity: steps.Identity{Rank: steps.Rank{Group: uint64(i), Rank: 0}},
			Attrs:    attrs, At: t0.Add(time.Duration(i) * time.Millisecond),
		}
		runs.atStep(runs.at(r), r)
	}
	assert.Equal(t, maxRememberedRuns+2, runs.rankLabels)
	runs.forget(t0.Add(time.Minute))
	assert.Len(t, runs.runs, maxRememberedRuns)
	assert.Equal(t, maxRememberedRuns, runs.rankLabels)
	assert.Nil(t, runs.get(0))
	assert.Nil(t, runs.get(1))
	assert.NotNil(t, runs.get(2))
}
