// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemoviewexporter

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/runrecords"
)

// stepPoints appends one rank step's gauges as nemo_steps emits them: the
// five gauges with the same attributes and time, the iteration on the busy
// time point's exemplar.
func stepPoints(md pmetric.Metrics, run string, rank, iteration int64, host string, busy, relative float64) {
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr(attrkey.RunID, run)
	rm.Resource().Attributes().PutStr(attrkey.ServiceName, "nemo")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	ts := pcommon.Timestamp(time.Unix(1000+iteration, 0).UnixNano())
	for _, g := range []struct {
		name string
		v    float64
	}{
		{runrecords.StepDuration, 1},
		{runrecords.StepBusyTime, busy},
		{runrecords.StepWaitTime, 1 - busy},
		{runrecords.StepRelativeScore, relative},
		{runrecords.StepIndividualScore, 1},
	} {
		m := ms.AppendEmpty()
		m.SetName(g.name)
		dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(ts)
		dp.SetDoubleValue(g.v)
		dp.Attributes().PutStr(attrkey.RunID, run)
		dp.Attributes().PutInt(attrkey.DLRank, rank)
		dp.Attributes().PutStr(attrkey.HostName, host)
		if g.name == runrecords.StepBusyTime {
			dp.Exemplars().AppendEmpty().FilteredAttributes().PutInt(runrecords.StepIteration, iteration)
		}
	}
}

func testStore(runs, steps, ranks int) *store {
	l := limitsOf(createDefaultConfig().(*Config)) // thresholds 0.7, the hosts' defaults
	l.runs, l.steps, l.ranks = runs, steps, ranks
	return newStore(l, time.Now)
}

func TestStepsMakeTheHeatmapAndStragglers(t *testing.T) {
	s := testStore(10, 10, 10)
	md := pmetric.NewMetrics()
	for it := int64(1); it <= 3; it++ {
		for rank := int64(3); rank >= 0; rank-- { // out of order: rows sort by rank
			busy, rel := 0.2, 1.0
			if rank == 2 && it == 2 {
				busy, rel = 0.6, 0.333
			}
			stepPoints(md, "run-1", rank, it, "node-"+string(rune('a'+rank/2)), busy, rel)
		}
	}
	s.addMetrics(md)
	d, ok := s.detail("run-1")
	require.True(t, ok)
	assert.Equal(t, []int64{1, 2, 3}, d.Iterations)
	require.Len(t, d.RankList, 4)
	assert.Equal(t, rankJSON{Rank: 2, Host: "node-b"}, d.RankList[2])
	require.Len(t, d.Heatmap, 3)
	row, err := base64.StdEncoding.DecodeString(d.Heatmap[1])
	require.NoError(t, err)
	assert.Equal(t, []byte{255, 255, quantize(0.333), 255}, row)
	assert.Equal(t, []stragglerJSON{{Rank: 2, Host: "node-b", Iteration: 2, Relative: 0.333, Individual: 1, Busy: 0.6}}, d.Stragglers)
	assert.Equal(t, stepTimeJSON{Iteration: 2, MedianBusy: 0.2, SlowestBusy: 0.6, SlowestRank: 2, MedianDuration: 1, Ranks: 4}, d.StepTimes[1])
	assert.Equal(t, "training", d.State)
	assert.Equal(t, int64(3), *d.LastIteration)
}

func TestBusyPointWithoutIterationIsNotShown(t *testing.T) {
	s := testStore(10, 10, 10)
	md := pmetric.NewMetrics()
	stepPoints(md, "run-1", 0, 1, "h", 0.2, 1)
	busy := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(1)
	busy.Gauge().DataPoints().At(0).Exemplars().RemoveIf(func(pmetric.Exemplar) bool { return true })
	s.addMetrics(md)
	_, ok := s.detail("run-1")
	assert.False(t, ok, "a step without its iteration (nemo_steps with an interval) cannot be placed")
}

func TestBounds(t *testing.T) {
	s := testStore(2, 3, 2)
	md := pmetric.NewMetrics()
	for it := int64(1); it <= 5; it++ {
		for rank := range int64(3) {
			stepPoints(md, "a", rank, it, "h", 0.2, 1)
		}
	}
	s.addMetrics(md)
	d, _ := s.detail("a")
	assert.Equal(t, []int64{3, 4, 5}, d.Iterations, "the latest max_steps iterations")
	assert.Len(t, d.RankList, 2, "the first max_ranks ranks")
	assert.Equal(t, 1, d.RanksOver)

	for _, run := range []string{"b", "c"} {
		md := pmetric.NewMetrics()
		stepPoints(md, run, 0, 1, "h", 0.2, 1)
		s.addMetrics(md)
	}
	_, ok := s.detail("a")
	assert.False(t, ok, "max_runs: the run updated longest ago goes")
	assert.Len(t, s.summaries(), 2)
}

func record(ld plog.Logs, event string, fill func(pcommon.Map), body string) {
	const run = "run-1"
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr(attrkey.RunID, run)
	rec := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	rec.SetTimestamp(pcommon.Timestamp(time.Unix(2000, 0).UnixNano()))
	rec.Attributes().PutStr(runrecords.EventName, event)
	rec.Body().SetStr(body)
	fill(rec.Attributes())
}

func TestStallsAndGoodput(t *testing.T) {
	s := testStore(10, 10, 10)
	ld := plog.NewLogs()
	record(ld, runrecords.EventStalled, func(m pcommon.Map) {
		m.PutStr(runrecords.StallKind, "behind")
		m.PutInt(runrecords.StallIteration, 5)
		m.PutDouble(runrecords.StallSeconds, 61)
		m.PutEmptySlice(runrecords.StallRanks).AppendEmpty().SetInt(2)
		m.PutEmptySlice(runrecords.StallHosts).AppendEmpty().SetStr("node-b")
		m.PutInt(runrecords.StallStage, 1)
	}, "run run-1 stalled at iteration 5")
	s.addLogs(ld)
	d, _ := s.detail("run-1")
	assert.Equal(t, "stalled", d.State)
	assert.Equal(t, "behind", d.StallKind)
	require.Len(t, d.Stalls, 1)
	st := d.Stalls[0]
	assert.Equal(t, []int64{2}, st.Ranks)
	assert.Equal(t, []string{"node-b"}, st.Hosts)
	assert.Equal(t, int64(1), *st.Stage)
	assert.True(t, st.Ongoing)
	assert.Equal(t, stamp(time.Unix(2000-61, 0)), st.Start)

	ld = plog.NewLogs()
	record(ld, runrecords.EventResumed, func(m pcommon.Map) { m.PutDouble(runrecords.StallSeconds, 70) }, "resumed")
	record(ld, runrecords.EventGoodput, func(m pcommon.Map) {
		m.PutDouble(runrecords.Goodput, 0.5)
		m.PutDouble(runrecords.TimePrefix+"productive", 30)
		m.PutDouble(runrecords.TimePrefix+"stalled", 30)
		m.PutDouble(runrecords.WallSeconds, 60)
		m.PutInt(runrecords.Attempts, 2)
		m.PutBool(runrecords.GoodputFinal, true)
		top := m.PutEmptySlice(runrecords.TopRanks).AppendEmpty().SetEmptyMap()
		top.PutInt(runrecords.TopRankRank, 2)
		top.PutStr(runrecords.TopRankHost, "node-b")
		top.PutDouble(runrecords.TopRankSeconds, 1.5)
	}, "run run-1: goodput 50%")
	s.addLogs(ld)
	d, _ = s.detail("run-1")
	assert.Equal(t, "ended", d.State)
	assert.False(t, d.Stalls[0].Ongoing)
	assert.InDelta(t, 70, d.Stalls[0].Seconds, 0)
	require.NotNil(t, d.GoodputDetail)
	assert.InDelta(t, 0.5, *d.Goodput, 0)
	assert.Len(t, d.GoodputDetail.Categories, 10, "every category, zeros too")
	assert.Equal(t, []topRankJSON{{Rank: 2, Host: "node-b", Seconds: 1.5}}, d.GoodputDetail.TopRanks)
	assert.Equal(t, int64(2), d.GoodputDetail.Attempts)
}

func TestOtherRecordsAndMetricsAreIgnored(t *testing.T) {
	s := testStore(10, 10, 10)
	ld := plog.NewLogs()
	record(ld, "something.else", func(pcommon.Map) {}, "x")
	s.addLogs(ld)
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("nemo.step.busy_time")
	m.SetEmptySum().DataPoints().AppendEmpty().Attributes().PutStr(attrkey.RunID, "run-2")
	s.addMetrics(md)
	assert.Empty(t, s.summaries())
}
