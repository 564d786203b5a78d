// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemoviewexporter

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/nemo-lens/otelcol-nemo/exporter/nemoviewexporter/internal/metadata"
	"github.com/nemo-lens/otelcol-nemo/exporter/nemoviewexporter/internal/metadatatest"
	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/runrecords"
)

// fleetRun is a run of 4 ranks (node-a ranks 0 and 1, node-b 2 and 3) of
// steps iterations in which rank 2 (node-b) is slow on slow of them, and
// has cost the run seconds of straggler time.
func fleetRun(s *store, run string, steps, slow int, seconds float64) {
	md := pmetric.NewMetrics()
	for it := int64(1); it <= int64(steps); it++ {
		for rank := range int64(4) {
			busy, rel := 0.2, 1.0
			if rank == 2 && it <= int64(slow) {
				busy, rel = 0.6, 0.333
			}
			stepPoints(md, run, rank, it, fmt.Sprintf("node-%c", 'a'+rank/2), busy, rel)
		}
	}
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName(runrecords.RankStragglerTime)
	dp := m.SetEmptySum().DataPoints().AppendEmpty()
	dp.Attributes().PutStr(attrkey.RunID, run)
	dp.Attributes().PutInt(attrkey.DLRank, 2)
	dp.Attributes().PutStr(attrkey.HostName, "node-b")
	dp.SetDoubleValue(seconds)
	s.addMetrics(md)
}

// TestTheFleetsHosts: three runs in a row with node-b's rank the
// straggler (3 of 5 steps in each; 1.5 s each run) and, in the third,
// node-c the culprit of a 40 s stall: /hosts puts node-c first (40 s),
// node-b second (4.5 s, 9 of its 30 rank-steps), node-a last; the drain
// list names node-b (a straggler in 3 runs, past 2) and not node-c (one
// run). A straggler time that grows adds only what it grew by.
func TestTheFleetsHosts(t *testing.T) {
	s := testStore(10, 10, 10)
	for _, run := range []string{"r1", "r2", "r3"} {
		fleetRun(s, run, 5, 3, 1.0)
		fleetRun(s, run, 5, 3, 1.5) // the cumulative time grew by 0.5
	}
	ld := plog.NewLogs()
	record(ld, runrecords.EventStalled, func(m pcommon.Map) {
		m.PutStr(attrkey.RunID, "r3")
		m.PutStr(runrecords.StallKind, "behind")
		m.PutEmptySlice(runrecords.StallHosts).AppendEmpty().SetStr("node-c")
	}, "stalled")
	record(ld, runrecords.EventResumed, func(m pcommon.Map) {
		m.PutStr(attrkey.RunID, "r3")
		m.PutDouble(runrecords.StallSeconds, 40)
	}, "resumed")
	s.addLogs(ld)

	h := s.hosts()
	require.Len(t, h.Hosts, 3)
	assert.Equal(t, []string{"node-c", "node-b", "node-a"}, []string{h.Hosts[0].Host, h.Hosts[1].Host, h.Hosts[2].Host})
	c, b, a := h.Hosts[0], h.Hosts[1], h.Hosts[2]
	assert.InDelta(t, 40, c.StalledSeconds, 0)
	assert.Equal(t, int64(1), c.CulpritStalls)
	assert.Equal(t, 1, c.CostlyRuns)
	assert.False(t, c.Drain, "one run is not a habit")
	assert.Equal(t, 3, b.Runs)
	assert.Equal(t, int64(30), b.RankSteps, "every rank-step once (2 ranks x 5 steps x 3 runs), though sent twice")
	assert.Equal(t, int64(9), b.StragglerSteps)
	assert.InDelta(t, 4.5, b.StragglerSeconds, 1e-9)
	assert.True(t, b.Drain)
	assert.Equal(t, []string{"a straggler (3 or more straggler steps) in 3 runs"}, b.Reasons)
	assert.Zero(t, a.StragglerSteps)
	assert.False(t, a.Drain)
	require.Len(t, h.Drain, 1)
	assert.Equal(t, "node-b", h.Drain[0].Host)

	// The same on the collector's own telemetry: the hosts that cost
	// something.
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) }) //nolint:usetesting // t.Context() is canceled before Cleanup runs
	tb, err := metadata.NewTelemetryBuilder(tel.NewTelemetrySettings())
	require.NoError(t, err)
	defer tb.Shutdown()
	require.NoError(t, hostMetrics(tb, s))
	host := func(name string) attribute.Set { return attribute.NewSet(attribute.String("host.name", name)) }
	metadatatest.AssertEqualNemoHostDrain(t, tel, []metricdata.DataPoint[int64]{{Attributes: host("node-b"), Value: 1}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualNemoHostCostlyRuns(t, tel, []metricdata.DataPoint[int64]{
		{Attributes: host("node-c"), Value: 1}, {Attributes: host("node-b"), Value: 3},
	}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualNemoHostCost(t, tel, []metricdata.DataPoint[float64]{
		{Attributes: host("node-c"), Value: 40}, {Attributes: host("node-b"), Value: 4.5},
	}, metricdatatest.IgnoreTimestamp())
}

// TestTheFleetsWindowAndBounds: what is older than hosts::window drops out;
// past max_hosts, hosts are counted, not tracked.
func TestTheFleetsWindowAndBounds(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	s := testStore(10, 10, 10)
	s.now = func() time.Time { return now }
	s.limits.hosts.window = time.Hour
	s.limits.hosts.maxHosts = 1
	fleetRun(s, "old", 5, 3, 1)
	require.Len(t, s.hosts().Hosts, 1)
	assert.Equal(t, "node-a", s.hosts().Hosts[0].Host, "the first seen")
	assert.Equal(t, 1, s.hosts().Untracked, "node-b, counted once")

	now = now.Add(59 * time.Minute)
	assert.Len(t, s.hosts().Hosts, 1, "within the window")
	now = now.Add(5 * time.Minute)
	assert.Empty(t, s.hosts().Hosts, "older than the window")
}
