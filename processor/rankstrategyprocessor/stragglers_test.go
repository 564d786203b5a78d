// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor

import (
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
)

// score is busy-time ratio a/b rounded as the processor reports it.
func score(a, b time.Duration) float64 {
	return float64(int64(float64(a)/float64(b)*1000+0.5)) / 1000
}

// checkScores asserts that every kept straggler span of rank on iteration
// carries these scores, and that no other span carries any.
func checkScores(t *testing.T, got []outSpan, want map[[2]int64][2]float64) {
	t.Helper()
	for _, s := range got {
		w, kept := want[[2]int64{s.rank, s.iteration}]
		if s.keptReason != "straggler" {
			assert.False(t, s.hasRelative || s.hasIndiv, "%s carries no scores", s)
			continue
		}
		require.True(t, kept, "%s was not expected to be kept", s)
		require.True(t, s.hasRelative && s.hasIndiv, "%s carries both scores", s)
		assert.Equal(t, w[0], s.relative, "relative score of %s", s)
		assert.Equal(t, w[1], s.individual, "individual score of %s", s)
	}
}

// 64 ranks in synchronous data parallelism, single_rank keeps rank 63; rank
// 17 computes twice as long on steps 5 and 9 and every other rank waits for
// it in grad_sync, so all step spans last the same. Exactly rank 17's
// subtrees of steps 5 and 9 come out beside everything of rank 63, whatever
// order and batches the spans came in, with their scores, plus a late child
// of rank 17's step 5; a late child of a dropped step is dropped. Steps are
// decided at the tick after the last rank reported, long before
// decision_wait.
func TestStragglersKeepSlowRankSteps(t *testing.T) {
	h := newStragglerHarness(t, nil, nil)
	run := newTrainingRun(64, map[int64]map[int64]float64{5: {17: 2}, 9: {17: 2}})

	sent := 0
	for it := int64(1); it <= 12; it++ {
		sent += sendStep(t, h, run, it)
		h.clock.Advance(time.Second) // one tick
		require.Equal(t, it, h.total(t, "stragglers_steps_decided"), "step %d is decided as soon as it is complete", it)
		h.clock.Advance(stepPeriod - time.Second)
		if it == 8 {
			h.consume(t, run.batch(17, 5, lateChildN))
			h.consume(t, run.batch(3, 5, lateChildN))
			sent += 2
		}
	}
	// megatron.train of a dropped rank arrives at the end: in no step, it
	// is dropped once it waited decision_wait.
	h.consume(t, run.jobSpan(5))
	sent++
	h.clock.Advance(11 * time.Second)

	var want []string
	for it := int64(1); it <= 12; it++ {
		want = append(want, wholeStep(63, it, "")...)
	}
	want = append(want, wholeStep(17, 5, "straggler")...)
	want = append(want, wholeStep(17, 9, "straggler")...)
	want = append(want, outSpan{rank: 17, iteration: 5, n: lateChildN}.String()+"straggler")
	sort.Strings(want)
	got := outputSpans(t, h.sink.AllTraces())
	assert.Equal(t, want, describe(got))

	fastest := run.StepOf(0, 5).Busy()
	slowBusy := run.StepOf(17, 5).Busy()
	ownBest := run.StepOf(17, 1).Busy()
	scores := [2]float64{score(fastest, slowBusy), score(ownBest, slowBusy)}
	assert.Equal(t, [2]float64{0.531, 0.542}, scores, "830ms / 1564ms and 847ms / 1564ms")
	checkScores(t, got, map[[2]int64][2]float64{{17, 5}: scores, {17, 9}: scores})

	keptStraggler := int64(2*spansPerStep + 1)
	assert.Equal(t, keptStraggler, h.items(t, true, reasonStraggler))
	assert.Equal(t, int64(12*spansPerStep), h.items(t, true, reasonSelected))
	assert.Equal(t, int64(sent)-keptStraggler-int64(12*spansPerStep), h.items(t, false, reasonNotSelected), "every held span is accounted for")
	assert.Equal(t, int64(12), h.total(t, "stragglers_steps_decided"))
	assert.Equal(t, int64(2), h.total(t, "stragglers_kept"))
	assert.Zero(t, h.total(t, "stragglers_early_decisions"))
	assert.Zero(t, h.total(t, "stragglers_ranks_missing"))
	assert.Equal(t, int64(2), h.total(t, "stragglers_late_spans"))
	assert.Equal(t, int64(2), h.total(t, "stragglers_decision_cache_hits"))
	assert.Zero(t, h.total(t, "stragglers_spans_held"), "nothing left held")
	assert.Zero(t, h.total(t, "stragglers_send_failed"))
	assert.Empty(t, h.logged.FilterLevelExact(zapcore.WarnLevel).All())
}

// Both span taxonomies and both trace shapes (a step as a child of the
// run-long job span, a step as its own trace root) find the same straggler.
func TestStragglersTaxonomiesAndTraceShapes(t *testing.T) {
	for _, shape := range lensfixture.Shapes {
		t.Run(shape.String(), func(t *testing.T) {
			h := newStragglerHarness(t, nil, nil)
			run := newTrainingRun(16, map[int64]map[int64]float64{3: {6: 1.5}})
			run.Shape = shape
			for it := int64(1); it <= 4; it++ {
				sendStep(t, h, run, it)
				h.clock.Advance(time.Second)
			}
			var want []string
			for it := int64(1); it <= 4; it++ {
				want = append(want, wholeStep(15, it, "")...)
			}
			want = append(want, wholeStep(6, 3, "straggler")...)
			sort.Strings(want)
			got := outputSpans(t, h.sink.AllTraces())
			assert.Equal(t, want, describe(got))
			busy := run.StepOf(6, 3).Busy()
			checkScores(t, got, map[[2]int64][2]float64{{6, 3}: {
				score(run.StepOf(0, 1).Busy(), busy), score(run.StepOf(6, 1).Busy(), busy),
			}})
			assert.Equal(t, int64(4), h.total(t, "stragglers_steps_decided"), "all decided before decision_wait")
		})
	}
}

// Wall-clock durations are alike on every rank; the slow rank is found only
// by subtracting the waits, the kept rank's too: with two ranks and one step
// (no history, so only the relative score can tell), the dropped rank 0 is
// slow and the kept rank 1 is fast only once its grad_sync is subtracted.
func TestStragglersMeasureKeptRanksToo(t *testing.T) {
	h := newStragglerHarness(t, nil, nil)
	run := newTrainingRun(2, map[int64]map[int64]float64{1: {0: 2}})
	for rank := range run.worldSize() {
		h.consume(t, run.batch(rank, 1, endOrder...))
	}
	h.clock.Advance(time.Second)
	got := outputSpans(t, h.sink.AllTraces())
	want := append(wholeStep(1, 1, ""), wholeStep(0, 1, "straggler")...)
	sort.Strings(want)
	assert.Equal(t, want, describe(got))
	checkScores(t, got, map[[2]int64][2]float64{{0, 1}: {score(run.StepOf(1, 1).Busy(), run.StepOf(0, 1).Busy()), 1}})
}

// A rank that never reports is counted when decision_wait ends; the step is
// still decided with the ranks that did report, keeping the worst
// max_ranks_per_step. A dropped rank that reports after the decision reopens
// the step until the next tick, so that its waits count, when the step has
// room left: then a slow one is kept; otherwise it follows the decision.
func TestStragglersMissingAndLateRanks(t *testing.T) {
	h := newStragglerHarness(t, func(c *Config) { c.Stragglers.Get().MaxRanksPerStep = 2 }, nil)
	// Step 1: ranks 3, 4 and 5 are slow (3x, 2.5x, 1.6x), rank 9 (2x) and
	// rank 10 report after the decision, rank 12 never does. Step 2: rank 9
	// (2x) reports late again, rank 12 never.
	run := newTrainingRun(16, map[int64]map[int64]float64{1: {3: 3, 4: 2.5, 5: 1.6, 9: 2}, 2: {9: 2}})
	send := func(it int64, skip ...int64) {
		for rank := range run.worldSize() {
			if !slices.Contains(skip, rank) {
				h.consume(t, run.batch(rank, it, endOrder...))
			}
		}
	}
	send(1, 9, 10, 12)
	h.clock.Advance(time.Second)
	assert.Zero(t, h.total(t, "stragglers_steps_decided"), "incomplete: waits for decision_wait")
	h.clock.Advance(9 * time.Second)
	assert.Equal(t, int64(1), h.total(t, "stragglers_steps_decided"))
	assert.Equal(t, int64(3), h.total(t, "stragglers_ranks_missing"), "ranks 9, 10 and 12")
	h.consume(t, run.batch(9, 1, endOrder...))
	h.consume(t, run.batch(10, 1, endOrder...))

	send(2, 9, 12)
	h.clock.Advance(10 * time.Second)
	assert.Equal(t, int64(5), h.total(t, "stragglers_ranks_missing"))
	h.consume(t, run.batch(9, 2, endOrder...))
	h.clock.Advance(time.Second)

	got := outputSpans(t, h.sink.AllTraces())
	var want []string
	want = append(want, wholeStep(15, 1, "")...)
	want = append(want, wholeStep(15, 2, "")...)
	want = append(want, wholeStep(3, 1, "straggler")...)
	want = append(want, wholeStep(4, 1, "straggler")...)
	want = append(want, wholeStep(9, 2, "straggler")...)
	sort.Strings(want)
	assert.Equal(t, want, describe(got), "the 2 worst of 3 on time; the late rank 9 finds step 1 full and step 2 open")
	fastest := run.StepOf(0, 1).Busy()
	checkScores(t, got, map[[2]int64][2]float64{
		{3, 1}: {score(fastest, run.StepOf(3, 1).Busy()), 1},
		{4, 1}: {score(fastest, run.StepOf(4, 1).Busy()), 1},
		{9, 2}: {score(fastest, run.StepOf(9, 2).Busy()), 1},
	})
	assert.Equal(t, int64(3), h.total(t, "stragglers_kept"))
	assert.Equal(t, int64(2), h.total(t, "stragglers_steps_decided"), "a reopened step is not counted again")
	assert.Equal(t, int64(3*spansPerStep), h.total(t, "stragglers_late_spans"))
	assert.Zero(t, h.total(t, "stragglers_spans_held"))
}

// A rank that is the last to report a step, its step span still missing
// when decision_wait ends, is kept with what arrived of it (scores of 0), in
// both trace shapes and both step names, and its step span too when it
// comes late. When more
// ranks are missing than max_ranks_per_step has room for (a lost node, not a
// straggler), they are only counted.
func TestStragglersKeepLastToReport(t *testing.T) {
	for _, shape := range lensfixture.Shapes {
		t.Run(shape.String(), func(t *testing.T) {
			h := newStragglerHarness(t, nil, nil)
			run := newTrainingRun(16, nil)
			run.Shape = shape
			children := endOrder[:len(endOrder)-1] // every span but the step span (n=0)
			send := func(it int64, lastToReport ...int64) {
				for rank := range run.worldSize() {
					ns := endOrder
					if slices.Contains(lastToReport, rank) {
						ns = children
					}
					h.consume(t, run.batch(rank, it, ns...))
				}
			}
			// Step 1: rank 5 alone has not sent its step span.
			send(1, 5)
			h.clock.Advance(10 * time.Second)
			assert.Equal(t, int64(1), h.total(t, "stragglers_ranks_missing"))
			h.consume(t, run.batch(5, 1, 0))
			// Step 2: five ranks without their step span, one more than
			// max_ranks_per_step (4).
			send(2, 1, 2, 3, 4, 5)
			h.clock.Advance(10 * time.Second)
			assert.Equal(t, int64(6), h.total(t, "stragglers_ranks_missing"))
			h.clock.Advance(10 * time.Second)

			got := outputSpans(t, h.sink.AllTraces())
			var want []string
			want = append(want, wholeStep(15, 1, "")...)
			want = append(want, wholeStep(15, 2, "")...)
			want = append(want, wholeStep(5, 1, "straggler")...)
			sort.Strings(want)
			assert.Equal(t, want, describe(got), "rank 5 kept whole on step 1, its step span late; nothing of step 2's five")
			for _, o := range got {
				if o.rank == 5 {
					assert.True(t, o.hasRelative && o.hasIndiv, "%s carries scores", o)
					assert.Zero(t, o.relative, "%s", o)
					assert.Zero(t, o.individual, "%s", o)
				}
			}
			assert.Equal(t, int64(1), h.total(t, "stragglers_kept"))
			assert.Zero(t, h.total(t, "stragglers_spans_held"))
		})
	}
}

// The individual score finds a rank that slows down against its own past
// when the relative score cannot: on step 3 every rank is 1.3x slower (a
// harder batch) and rank 2 is 1.7x slower, within 0.7 of the step's fastest
// rank but at 0.63 of its own best.
func TestStragglersIndividualScore(t *testing.T) {
	h := newStragglerHarness(t, nil, nil)
	run := newTrainingRun(4, map[int64]map[int64]float64{3: {0: 1.3, 1: 1.3, 2: 1.7, 3: 1.3}})
	for it := int64(1); it <= 3; it++ {
		for rank := range run.worldSize() {
			h.consume(t, run.batch(rank, it, endOrder...))
		}
		h.clock.Advance(time.Second)
	}
	got := outputSpans(t, h.sink.AllTraces())
	var want []string
	for it := int64(1); it <= 3; it++ {
		want = append(want, wholeStep(3, it, "")...)
	}
	want = append(want, wholeStep(2, 3, "straggler")...)
	sort.Strings(want)
	assert.Equal(t, want, describe(got))
	busy := run.StepOf(2, 3).Busy()
	scores := [2]float64{score(run.StepOf(0, 3).Busy(), busy), score(run.StepOf(2, 1).Busy(), busy)}
	assert.Equal(t, [2]float64{0.786, 0.629}, scores)
	checkScores(t, got, map[[2]int64][2]float64{{2, 3}: scores})
}
