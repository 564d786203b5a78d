// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsprocessor

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/nemo-lens/otelcol-nemo/internal/runrecords"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
	"github.com/nemo-lens/otelcol-nemo/processor/nemostepsprocessor/internal/metadatatest"
)

func TestLabelsFollowTheResource(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	id := newIdentity(cfg)
	rank := lensfixture.Rank{Run: "run-a", Rank: 9}
	attrs := pcommon.NewMap()
	rank.PutResource(attrs)
	attrs.PutStr("nv.dl.local_rank", strconv.FormatInt(rank.LocalRank(), 10)) // a string beside the int rank

	l := id.labelsFor(nil, attrs, 9)
	assert.Equal(t, resourceValue(rank, "service.name"), l.service)
	assert.Equal(t, []label{{key: "nemo.run.id", str: "run-a"}}, l.group)
	assert.Equal(t, []label{{key: "nv.dl.rank", num: 9, isNum: true}, {key: "host.name", str: rank.Host()}, {key: "nv.dl.local_rank", num: rank.LocalRank(), isNum: true}}, l.node,
		"local rank as an int, whatever its type on the resource")
	assert.Same(t, l, id.labelsFor(l, attrs, 9), "unchanged: reused")

	attrs.PutInt("process.pid", resourceValue(rank, "process.pid").(int64)+1)
	assert.Same(t, l, id.labelsFor(l, attrs, 9), "a restart with a new pid is the same series")

	elsewhere := lensfixture.Rank{Rank: 7 * lensfixture.GPUsPerNode}.Host()
	attrs.PutStr("host.name", elsewhere)
	moved := id.labelsFor(l, attrs, 9)
	assert.NotSame(t, l, moved, "restarted on another node")
	assert.Equal(t, elsewhere, moved.node[1].str)

	attrs.PutStr("rl.worker_group", "policy")
	grouped := id.labelsFor(moved, attrs, 9)
	assert.Len(t, grouped.group, 2)
}

func TestWaitWhoseStepNeverComesExpires(t *testing.T) {
	h := newHarness(t, nil)
	job := syncJob{run: "run-x", world: 1}
	children := job.batch(ownRoot, 1, lensfixture.StepChildren, 0)
	expired := waitSpans(t, children)
	h.consume(children)
	h.clk.Advance(11 * time.Second)
	h.consume(job.batch(ownRoot, 2, lensfixture.WholeStep, 0))
	h.clk.Advance(time.Second)
	busy := named(h.points(), "nemo.step.busy_time")
	require.Len(t, busy, 1)
	assert.Equal(t, ns(job.step(0, 2).Busy()), busy[0].value)
	metadatatest.AssertEqualProcessorNemoStepsSpansSkipped(t, h.tel, []metricdata.DataPoint[int64]{
		{Value: int64(expired), Attributes: attribute.NewSet(attribute.String("reason", "pending_expired"))},
	}, metricdatatest.IgnoreTimestamp())
}

// span_wait, not decision_wait, bounds how long a wait span waits for its
// step span.
func TestWaitExpiresAtSpanWait(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.DecisionWait, c.SpanWait = time.Minute, 2*time.Second })
	job := syncJob{run: "run-x", world: 1}
	children := job.batch(ownRoot, 1, lensfixture.StepChildren, 0)
	expired := waitSpans(t, children)
	h.consume(children)
	h.clk.Advance(3 * time.Second)
	h.consume(job.batch(ownRoot, 2, lensfixture.WholeStep, 0))
	metadatatest.AssertEqualProcessorNemoStepsSpansSkipped(t, h.tel, []metricdata.DataPoint[int64]{
		{Value: int64(expired), Attributes: attribute.NewSet(attribute.String("reason", "pending_expired"))},
	}, metricdatatest.IgnoreTimestamp())
}

// A tick that decides many steps at once sends them in requests of at most
// maxBatchPoints points, so that an exporter whose queue counts items does
// not refuse one huge request whole.
func TestPointWriterCutsBatches(t *testing.T) {
	w := newPointWriter()
	l := &rankLabels{service: "megatron", group: []label{{key: "nemo.run.id", str: "run-b"}}, node: []label{{key: "nv.dl.rank", num: 1, isNum: true}}}
	const n = 2*maxBatchPoints + 100
	for i := range n {
		w.gauge(gBusy, l, int64(i), 1)
	}
	batches := slices.Collect(w.take().all)
	require.Len(t, batches, 3)
	total := 0
	for _, b := range batches {
		assert.LessOrEqual(t, b.points, maxBatchPoints)
		assert.Equal(t, b.points, b.md.DataPointCount())
		total += b.points
	}
	assert.Equal(t, n, total)
	assert.Empty(t, slices.Collect(w.take().all), "taken: nothing left")
}

// A wave of decided steps is recorded compactly and built into requests one
// at a time, each sent before the next is built: a record changed while
// the first request is with the consumer shows in a later request (built
// all at once, it would not). A rank step's gauges can span two requests;
// its busy time point keeps its exemplar either way.
func TestPointBatchesAreBuiltAsSent(t *testing.T) {
	w := newPointWriter()
	l := &rankLabels{service: "megatron", group: []label{{key: "nemo.run.id", str: "run-b"}}, node: []label{{key: "nv.dl.rank", num: 1, isNum: true}}}
	const rankSteps = 2*maxBatchPoints/numGauges + 7
	for i := range rankSteps {
		w.stepGauges(l, int64(i+1), stepValues{1, 0.75, 0.25, 1, 1}, int64(i), &steps.RankStep{})
	}
	require.Equal(t, rankSteps, recorded(w), "one record per rank step")
	p := w.take()
	lastBlock := p.blocks[len(p.blocks)-1]
	var got []batch
	sent, exemplars := 0, 0
	for b := range p.all {
		if len(got) == 0 {
			lastBlock[len(lastBlock)-1].values[gBusy] = 42 // not built yet
		}
		got = append(got, b)
		sent += b.points
		exemplars += countExemplars(b.md)
	}
	require.Len(t, got, 3)
	assert.Equal(t, rankSteps*numGauges, sent)
	assert.Equal(t, rankSteps, exemplars, "every busy time point has its step's exemplar")
	last := got[2].md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for _, m := range last.All() {
		if m.Name() == runrecords.StepBusyTime {
			dps := m.Gauge().DataPoints()
			assert.Equal(t, 42.0, dps.At(dps.Len()-1).DoubleValue(), "the last request was built after the first was sent")
		}
	}
}

// A wave's records grow block by block: a record, once its block is full,
// is never copied again, and the points come out in the order recorded.
func TestPointWriterGrowsInBlocks(t *testing.T) {
	w := newPointWriter()
	l := &rankLabels{service: "megatron", node: []label{{key: "nv.dl.rank", num: 1, isNum: true}}}
	for i := range pointBlock {
		w.gauge(gBusy, l, int64(i), float64(i))
	}
	first := &w.blocks[0][0]
	const n = 3*pointBlock + 5
	for i := pointBlock; i < n; i++ {
		w.gauge(gBusy, l, int64(i), float64(i))
	}
	require.Len(t, w.blocks, 4)
	assert.Same(t, first, &w.blocks[0][0], "a full block is not copied")
	assert.Equal(t, n, recorded(w))
	seen := 0.0
	for b := range w.take().all {
		dps := b.md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints()
		for _, dp := range dps.All() {
			require.Equal(t, seen, dp.DoubleValue(), "in the order recorded")
			seen++
		}
	}
	assert.Equal(t, float64(n), seen)
}

// A rank step has as many gauges as the records readers rely on say
// (nemo_view sizes its batches by it).
func TestRankStepGaugesAreTheRecords(t *testing.T) {
	assert.Equal(t, runrecords.RankStepGauges, numGauges)
}

// recorded counts the records of w.
func recorded(w *pointWriter) int {
	n := 0
	for _, b := range w.blocks {
		n += len(b)
	}
	return n
}

// countExemplars counts the exemplars of md's gauge points.
func countExemplars(md pmetric.Metrics) int {
	n := 0
	for _, rm := range md.ResourceMetrics().All() {
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				for _, dp := range m.Gauge().DataPoints().All() {
					n += dp.Exemplars().Len()
				}
			}
		}
	}
	return n
}
