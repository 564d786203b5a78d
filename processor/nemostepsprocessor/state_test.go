// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsprocessor

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

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
	batches := w.take()
	require.Len(t, batches, 3)
	total := 0
	for _, b := range batches {
		assert.LessOrEqual(t, b.points, maxBatchPoints)
		assert.Equal(t, b.points, b.md.DataPointCount())
		total += b.points
	}
	assert.Equal(t, n, total)
	assert.Empty(t, w.take(), "taken: nothing left")
}
