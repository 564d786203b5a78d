// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsprocessor

import (
	"cmp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
	"github.com/nemo-lens/otelcol-nemo/processor/nemostepsprocessor/internal/metadatatest"
)

const (
	computeTime   = 100 * time.Millisecond
	syncTime      = 20 * time.Millisecond
	optimizerTime = 30 * time.Millisecond
)

// syncJob is a synchronous data-parallel job: every rank's step starts and
// ends together; slow[iteration] = rank computes slowdown times (3 unless
// set) longer on that step, so that all the others wait longer in the
// gradient sync.
type syncJob struct {
	run, group string
	world      int64
	// compute is every rank's compute time; computeTime unless set.
	compute  time.Duration
	slow     map[int64]int64
	slowdown int64
}

// fixture is the job as the shared fixture describes it, its steps sent in
// shape.
func (j syncJob) fixture(shape lensfixture.Shape) lensfixture.Run {
	compute := cmp.Or(j.compute, computeTime)
	slowdown := time.Duration(cmp.Or(j.slowdown, 3))
	return lensfixture.Run{
		Ranks: lensfixture.Fleet(lensfixture.Rank{Run: j.run, Group: j.group, WorldSize: j.world}),
		Shape: shape,
		Step:  lensfixture.Step{GradSync: syncTime, Optimizer: optimizerTime},
		Compute: func(r, iteration int64) time.Duration {
			if slow, ok := j.slow[iteration]; ok && slow == r {
				return slowdown * compute
			}
			return compute
		},
	}
}

func (j syncJob) rank(r int64) lensfixture.Rank { return j.fixture(ownRoot).Ranks[r] }

// step is rank r's step on iteration, what the processor must measure.
func (j syncJob) step(r, iteration int64) lensfixture.Step {
	return j.fixture(ownRoot).StepOf(r, iteration)
}

// stepEnd is when rank r's step span of iteration ends: with every rank's.
func (j syncJob) stepEnd(r, iteration int64) pcommon.Timestamp {
	run := j.fixture(ownRoot)
	return pcommon.NewTimestampFromTime(run.StepStart(iteration).Add(run.StepOf(r, iteration).Duration()))
}

// batch is part of one iteration of the given ranks, one resource per
// rank.
func (j syncJob) batch(shape lensfixture.Shape, iteration int64, part lensfixture.Part, ranks ...int64) ptrace.Traces {
	run := j.fixture(shape)
	td := ptrace.NewTraces()
	for _, r := range ranks {
		rank := run.Ranks[r]
		run.AppendStepPart(lensfixture.AppendResource(td, rank), rank, iteration, part)
	}
	return td
}

func allRanks(n int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i)
	}
	return out
}

func ns(d time.Duration) float64 { return seconds(d.Nanoseconds()) }

func TestSynchronousJob(t *testing.T) {
	for _, shape := range lensfixture.Shapes {
		t.Run(shape.String(), func(t *testing.T) {
			testSynchronousJob(t, shape)
		})
	}
}

func testSynchronousJob(t *testing.T, shape lensfixture.Shape) {
	h := newHarness(t, nil)
	job := syncJob{run: "run-a", world: 16, slow: map[int64]int64{3: 5}}
	const iterations = 5
	for it := int64(1); it <= iterations; it++ {
		h.consume(job.batch(shape, it, lensfixture.WholeStep, allRanks(16)...))
	}
	assert.Empty(t, h.points(), "ConsumeTraces only records; points go out from the ticker")
	h.clk.Advance(time.Second)

	points := h.points()
	require.Len(t, points, 16*iterations*numGauges+iterations)
	idx := byMetricRank(points)
	for r := range int64(16) {
		for _, name := range []string{"nemo.step.duration", "nemo.step.busy_time", "nemo.step.wait_time", "nemo.step.relative_score", "nemo.step.individual_score"} {
			require.Len(t, idx[name][r], iterations, "%s of rank %d: one point per step", name, r)
		}
		for i := range iterations {
			it := int64(i + 1)
			st := job.step(r, it)
			busy := idx["nemo.step.busy_time"][r][i]
			assert.Equal(t, ns(st.Busy()), busy.value, "rank %d iteration %d: busy time is compute + optimizer", r, it)
			assert.Equal(t, job.stepEnd(r, it), busy.ts, "stamped with the step span's end")
			assert.Equal(t, ns(st.Duration()), idx["nemo.step.duration"][r][i].value)
			assert.Equal(t, ns(st.Duration()-st.Busy()), idx["nemo.step.wait_time"][r][i].value, "the longer gradient sync")

			rel, ind := idx["nemo.step.relative_score"][r][i].value, idx["nemo.step.individual_score"][r][i].value
			if r == 5 && it == 3 {
				want := stepbusy.Round3(float64(job.step(0, it).Busy()) / float64(st.Busy()))
				assert.Equal(t, want, rel)
				assert.Less(t, rel, 0.7)
				assert.Equal(t, want, ind, "against its own best recent step")
			} else {
				assert.Equal(t, 1.0, rel, "rank %d iteration %d", r, it)
				assert.Equal(t, 1.0, ind, "rank %d iteration %d", r, it)
			}
		}
	}

	busy := idx["nemo.step.busy_time"][7][0]
	seven := job.rank(7)
	assert.Equal(t, map[string]any{"nemo.run.id": "run-a", "nv.dl.rank": int64(7), "host.name": seven.Host(), "nv.dl.local_rank": seven.LocalRank()}, busy.attrs,
		"identity only: no process.pid, no service.instance.id, no iteration")
	assert.Equal(t, map[string]any{"service.name": resourceValue(seven, "service.name"), "nemo.run.id": "run-a"}, busy.resource,
		"the ranks' service and their run: jsonl_file puts the points in the run's metrics.jsonl")
	assert.Equal(t, "s", busy.unit)
	assert.Equal(t, "1", idx["nemo.step.relative_score"][7][0].unit)

	counts := named(points, "nemo.step.stragglers")
	require.Len(t, counts, iterations, "the run's count after every step")
	var values []float64
	for _, p := range counts {
		values = append(values, p.value)
		assert.True(t, p.sum)
		assert.Equal(t, map[string]any{"nemo.run.id": "run-a"}, p.attrs)
		assert.Equal(t, pcommon.NewTimestampFromTime(job.fixture(shape).StepStart(1)), p.start, "from the first step counted")
	}
	assert.Equal(t, []float64{0, 0, 1, 1, 1}, values, "rank 5 on iteration 3 is the run's one straggler step")

	metadatatest.AssertEqualProcessorNemoStepsStepsDecided(t, h.tel, []metricdata.DataPoint[int64]{
		{Value: iterations, Attributes: attribute.NewSet(attribute.String("cause", "complete"))},
	}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorNemoStepsDataPoints(t, h.tel, []metricdata.DataPoint[int64]{
		{Value: int64(len(points))},
	}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorNemoStepsOpenRankSteps(t, h.tel, []metricdata.DataPoint[int64]{{Value: 0}}, metricdatatest.IgnoreTimestamp())
	h.shutdown()
	assert.Len(t, h.points(), len(points), "nothing left at shutdown")
}

func TestWaitSpansInAnEarlierBatch(t *testing.T) {
	h := newHarness(t, nil)
	job := syncJob{run: "run-b", world: 4, slow: map[int64]int64{2: 1}}
	// Children end first and are exported first: both steps' children in
	// one batch, the step spans in the next.
	children := ptrace.NewTraces()
	job.batch(ownRoot, 1, lensfixture.StepChildren, allRanks(4)...).ResourceSpans().MoveAndAppendTo(children.ResourceSpans())
	job.batch(ownRoot, 2, lensfixture.StepChildren, allRanks(4)...).ResourceSpans().MoveAndAppendTo(children.ResourceSpans())
	h.consume(children)
	h.consume(job.batch(ownRoot, 1, lensfixture.StepSpan, allRanks(4)...))
	h.consume(job.batch(ownRoot, 2, lensfixture.StepSpan, allRanks(4)...))
	h.clk.Advance(time.Second)

	idx := byMetricRank(h.points())
	for r := range int64(4) {
		for i, it := range []int64{1, 2} {
			assert.Equal(t, ns(job.step(r, it).Busy()), idx["nemo.step.busy_time"][r][i].value, "rank %d iteration %d", r, it)
		}
	}
	assert.Less(t, idx["nemo.step.relative_score"][1][1].value, 0.7, "rank 1 straggled on iteration 2")
}

func TestMissingRankDecidedAtDecisionWait(t *testing.T) {
	h := newHarness(t, nil)
	// Rank 3 computes twice as long: the others wait for it in the
	// gradient sync, and its spans come late.
	job := syncJob{run: "run-c", world: 4, slow: map[int64]int64{1: 3}, slowdown: 2}
	h.consume(job.batch(ownRoot, 1, lensfixture.WholeStep, 0, 1, 2))
	h.clk.Advance(time.Second)
	assert.Empty(t, h.points(), "rank 3 may still come")
	h.clk.Advance(9 * time.Second)

	points := h.points()
	assert.Len(t, points, 3*numGauges+1, "decided with the ranks that came")
	metadatatest.AssertEqualProcessorNemoStepsStepsDecided(t, h.tel, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("cause", "decision_wait"))},
	}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorNemoStepsRanksMissing(t, h.tel, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())

	// Rank 3's step span comes late, its compute twice as long: it is
	// scored against the ranks that came in time.
	h.consume(job.batch(ownRoot, 1, lensfixture.WholeStep, 3))
	h.clk.Advance(time.Second)

	idx := byMetricRank(h.points())
	require.Len(t, idx["nemo.step.busy_time"][3], 1)
	assert.Equal(t, ns(job.step(3, 1).Busy()), idx["nemo.step.busy_time"][3][0].value)
	assert.Equal(t, stepbusy.Round3(float64(job.step(0, 1).Busy())/float64(job.step(3, 1).Busy())), idx["nemo.step.relative_score"][3][0].value)
	counts := named(h.points(), "nemo.step.stragglers")
	assert.Equal(t, 1.0, counts[len(counts)-1].value, "the late rank was a straggler")
	metadatatest.AssertEqualProcessorNemoStepsStepsDecided(t, h.tel, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("cause", "decision_wait"))},
	}, metricdatatest.IgnoreTimestamp())
	h.shutdown()
}

func TestIntervalAggregation(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Interval = 30 * time.Second })
	job := syncJob{run: "run-d", world: 4, slow: map[int64]int64{2: 1}}
	for it := int64(1); it <= 3; it++ {
		h.consume(job.batch(ownRoot, it, lensfixture.WholeStep, allRanks(4)...))
	}
	h.clk.Advance(time.Second)
	assert.Empty(t, h.points(), "decided, but the interval is not over")
	h.clk.Advance(29 * time.Second)

	points := h.points()
	require.Len(t, points, 4*numGauges*numVariants+1, "per rank and interval: last, min and max of each gauge, plus the run's count")
	idx := byMetricRank(points)
	normal, slow := ns(job.step(1, 1).Busy()), ns(job.step(1, 2).Busy()) // rank 1 is slow on iteration 2
	assert.Equal(t, normal, idx["nemo.step.busy_time"][1][0].value, "last")
	assert.Equal(t, normal, idx["nemo.step.busy_time.min"][1][0].value)
	assert.Equal(t, slow, idx["nemo.step.busy_time.max"][1][0].value)
	assert.Equal(t, 1.0, idx["nemo.step.relative_score"][1][0].value, "last")
	assert.Equal(t, stepbusy.Round3(normal/slow), idx["nemo.step.relative_score.min"][1][0].value)
	assert.Equal(t, normal, idx["nemo.step.busy_time.max"][0][0].value, "rank 0 was never slow")
	assert.Equal(t, job.stepEnd(1, 3), idx["nemo.step.busy_time.min"][1][0].ts, "stamped with the last step's end")
	counts := named(points, "nemo.step.stragglers")
	require.Len(t, counts, 1)
	assert.Equal(t, 1.0, counts[0].value)

	h.clk.Advance(30 * time.Second)
	assert.Len(t, h.points(), len(points), "nothing new: an idle interval sends nothing")
	h.shutdown()
}

func TestShutdownDecidesOpenSteps(t *testing.T) {
	h := newHarness(t, nil)
	job := syncJob{run: "run-e", world: 8}
	h.consume(job.batch(ownRoot, 1, lensfixture.WholeStep, 0, 1))
	h.shutdown()
	assert.Len(t, h.points(), 2*numGauges+1)
	metadatatest.AssertEqualProcessorNemoStepsStepsDecided(t, h.tel, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("cause", "shutdown"))},
	}, metricdatatest.IgnoreTimestamp())
	require.NoError(t, h.c.ConsumeTraces(t.Context(), job.batch(ownRoot, 2, lensfixture.WholeStep, 0)), "after shutdown: ignored, no error")
}

func TestMaxOpenRankStepsDecidesEarly(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxOpenRankSteps = 5 })
	job := syncJob{run: "run-f", world: 8}
	h.consume(job.batch(ownRoot, 1, lensfixture.WholeStep, 0, 1, 2))
	h.consume(job.batch(ownRoot, 2, lensfixture.WholeStep, 0, 1, 2))
	h.clk.Advance(time.Second)
	assert.Len(t, named(h.points(), "nemo.step.busy_time"), 3, "iteration 1 decided early, iteration 2 still open")
	metadatatest.AssertEqualProcessorNemoStepsStepsDecided(t, h.tel, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("cause", "early"))},
	}, metricdatatest.IgnoreTimestamp())
	h.shutdown()
}

func TestDuplicateBatchCountsOnce(t *testing.T) {
	h := newHarness(t, nil)
	job := syncJob{run: "run-g", world: 2, slow: map[int64]int64{1: 0}}
	h.consume(job.batch(ownRoot, 1, lensfixture.WholeStep, 0, 1))
	h.consume(job.batch(ownRoot, 1, lensfixture.WholeStep, 0, 1))
	h.clk.Advance(time.Second)
	h.consume(job.batch(ownRoot, 1, lensfixture.WholeStep, 0, 1))
	h.clk.Advance(10 * time.Second)
	points := h.points()
	assert.Len(t, named(points, "nemo.step.busy_time"), 2, "a batch sent again (an exporter retry) adds nothing")
	idx := byMetricRank(points)
	assert.Equal(t, ns(job.step(0, 1).Busy()), idx["nemo.step.busy_time"][0][0].value, "the resent waits are not counted twice")
	counts := named(points, "nemo.step.stragglers")
	assert.Equal(t, 1.0, counts[len(counts)-1].value)
	h.shutdown()
}

func TestBadInputIsSkippedAndCounted(t *testing.T) {
	h := newHarness(t, nil)
	run := lensfixture.Run{Shape: ownRoot}
	td := ptrace.NewTraces()
	// No rank: a step span and its wait spans skipped, the other children
	// not counted (they are not read at all).
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "dataloader")
	run.AppendStepPart(rs.ScopeSpans().AppendEmpty().Spans(), lensfixture.Rank{}, 1, lensfixture.WholeStep)
	missing := 1 + waitSpans(t, td) // td holds the rankless step only, so far
	// A rank that is not a number.
	rs = td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("dl.rank", "three")
	run.AppendStepPart(rs.ScopeSpans().AppendEmpty().Spans(), lensfixture.Rank{}, 1, lensfixture.StepSpan)
	// A step span without its iteration, and one ending before it starts.
	rs = td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("dl.rank", " 3 ")
	rs.Resource().Attributes().PutStr("nemo.run.id", "run-h")
	ss := rs.ScopeSpans().AppendEmpty().Spans()
	rank := lensfixture.Rank{Run: "run-h", Rank: 3}
	iterations := lensfixture.Run{Shape: lensfixture.Shape{StepName: attrkey.MegatronTrainIteration, StepsAreRoots: true}}
	run.AppendStepPart(ss, rank, 6, lensfixture.StepSpan)
	ss.At(0).Attributes().Remove(attrkey.MegatronIteration)
	iterations.AppendStepPart(ss, rank, 7, lensfixture.StepSpan)
	start, end := ss.At(1).StartTimestamp(), ss.At(1).EndTimestamp()
	ss.At(1).SetStartTimestamp(end)
	ss.At(1).SetEndTimestamp(start)
	// The same rank's good step, iteration as a decimal string.
	iterations.AppendStepPart(ss, rank, 8, lensfixture.StepSpan)
	ss.At(2).Attributes().PutStr(attrkey.MegatronIteration, "8")
	h.consume(td)
	h.shutdown()

	metadatatest.AssertEqualProcessorNemoStepsSpansSkipped(t, h.tel, []metricdata.DataPoint[int64]{
		{Value: int64(missing), Attributes: attribute.NewSet(attribute.String("reason", "missing_rank"))},
		{Value: 1, Attributes: attribute.NewSet(attribute.String("reason", "invalid_rank"))},
		{Value: 1, Attributes: attribute.NewSet(attribute.String("reason", "missing_iteration"))},
		{Value: 1, Attributes: attribute.NewSet(attribute.String("reason", "invalid_duration"))},
	}, metricdatatest.IgnoreTimestamp())
	busy := named(h.points(), "nemo.step.busy_time")
	require.Len(t, busy, 1)
	assert.Equal(t, map[string]any{"nemo.run.id": "run-h", "nv.dl.rank": int64(3)}, busy[0].attrs, "a string rank under the older key: an int under the first of rank_keys")
	assert.Equal(t, ns(iterations.StepOf(3, 8).Duration()), busy[0].value)
	assert.Equal(t, map[string]any{"nemo.run.id": "run-h"}, busy[0].resource, "no service.name: the run only")
}

func TestWorkerGroupsAreApart(t *testing.T) {
	h := newHarness(t, nil)
	td := ptrace.NewTraces()
	for _, job := range []syncJob{
		{run: "run-rl", group: "policy", world: 2},
		{run: "run-rl", group: "generation", world: 2, compute: 4 * computeTime}, // a different workload, not a straggler
	} {
		job.batch(ownRoot, 1, lensfixture.WholeStep, 0, 1).ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	}
	h.consume(td)
	h.clk.Advance(time.Second)
	for _, p := range named(h.points(), "nemo.step.relative_score") {
		assert.Equal(t, 1.0, p.value, "ranks are compared within their group: %v", p.attrs)
	}
	counts := named(h.points(), "nemo.step.stragglers")
	require.Len(t, counts, 2, "one count per run and group")
	assert.ElementsMatch(t, []any{"policy", "generation"}, []any{counts[0].attrs["rl.worker_group"], counts[1].attrs["rl.worker_group"]})
	h.shutdown()
}

func TestConcurrentBatches(t *testing.T) {
	h := newHarness(t, nil)
	job := syncJob{run: "run-z", world: 16, slow: map[int64]int64{4: 9}}
	var wg sync.WaitGroup
	for part := range int64(4) {
		ranks := []int64{part * 4, part*4 + 1, part*4 + 2, part*4 + 3}
		wg.Go(func() {
			for it := int64(1); it <= 5; it++ {
				assert.NoError(t, h.c.ConsumeTraces(t.Context(), job.batch(inJob, it, lensfixture.WholeStep, ranks...)))
			}
		})
	}
	for range 3 {
		h.clk.Advance(100 * time.Millisecond) // ticks while the batches come
	}
	wg.Wait()
	h.shutdown()
	idx := byMetricRank(h.points())
	for r := range int64(16) {
		require.Len(t, idx["nemo.step.busy_time"][r], 5, "rank %d", r)
	}
	counts := named(h.points(), "nemo.step.stragglers")
	assert.Equal(t, 1.0, counts[len(counts)-1].value, "rank 9 on iteration 4")
}
