package nemostepsconnector

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

	"github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector/internal/metadatatest"
	"github.com/nemo-lens/otelcol-nemo/internal/lensfixture"
	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
)

func TestGenerationsBoundEntries(t *testing.T) {
	g := newGenerations[int, int](2)
	g.put(1, 10)
	g.put(2, 20)
	g.put(3, 30) // (1, 2) become the previous generation
	v, ok := g.get(1)
	require.True(t, ok, "the previous generation is still there")
	assert.Equal(t, 10, v)
	g.put(4, 40) // (3, 1) retire, 2 is forgotten
	_, ok = g.get(2)
	assert.False(t, ok)
	assert.LessOrEqual(t, g.len(), 4)
	seen := map[int]int{}
	g.each(func(k, v int) { seen[k] = v })
	assert.Equal(t, map[int]int{1: 10, 3: 30, 4: 40}, seen)
}

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

func TestGroupHashTreatsIntAndStringAlike(t *testing.T) {
	id := newIdentity(createDefaultConfig().(*Config))
	a, b := pcommon.NewMap(), pcommon.NewMap()
	a.PutInt("nemo.run.id", 42)
	b.PutStr("nemo.run.id", "42")
	assert.Equal(t, id.groupHash(a), id.groupHash(b))
	b.PutStr("rl.worker_group", "42")
	assert.NotEqual(t, id.groupHash(a), id.groupHash(b), "a group key present is not the same as absent")
}

func TestPendingWaitsAreBounded(t *testing.T) {
	var st rankState
	var tl tally
	for i := range maxPendingPerRank + 10 {
		st.addPending(pendingWait{iv: stepbusy.Interval{Start: int64(i), End: int64(i + 1)}, arrived: time.Second}, 0, &tl)
	}
	assert.Len(t, st.pending, maxPendingPerRank, "at most maxPendingPerRank per rank")
	assert.Equal(t, int64(10), tl.skipped[skipPendingExpired], "the oldest dropped, counted")
	assert.Equal(t, int64(10), st.pending[0].iv.Start)

	st.addPending(pendingWait{arrived: 5 * time.Second}, 2*time.Second, &tl)
	assert.Len(t, st.pending, 1, "the ones older than decision_wait expire")
	assert.Equal(t, int64(10+maxPendingPerRank), tl.skipped[skipPendingExpired])
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
	metadatatest.AssertEqualConnectorNemoStepsSpansSkipped(t, h.tel, []metricdata.DataPoint[int64]{
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
