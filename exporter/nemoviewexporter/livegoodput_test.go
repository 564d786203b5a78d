// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemoviewexporter

import (
	"path/filepath"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/nemo-lens/otelcol-nemo/internal/runrecords"
)

// goldenGoodput is nemo_steps' own output for its goodput case (a run of
// 4 ranks, a straggler, a save, an evaluation, a wedge and a relaunch):
// the metrics of every tick, and the records.
var goldenGoodput = filepath.Join("..", "..", "processor", "nemostepsprocessor", "testdata", "goodput_train_step_in_job")

// TestGoodputIsLiveOnThePage: nemo_steps' goodput metrics, tick by tick
// (its golden output), make the page's goodput before any record: the
// goodput so far, the settled time by category and the rest not settled
// yet adding up to the wall time, the straggler rank first among the top
// ranks; the final record then replaces them and later metrics do not.
func TestGoodputIsLiveOnThePage(t *testing.T) {
	md, err := golden.ReadMetrics(filepath.Join(goldenGoodput, "expected.yaml"))
	require.NoError(t, err)
	s := testStore(10, 100, 10)
	var lastGoodput float64
	var ticks int
	for _, rm := range md.ResourceMetrics().All() { // in the order nemo_steps sent them
		one := pmetric.NewMetrics()
		rm.CopyTo(one.ResourceMetrics().AppendEmpty())
		for _, m := range rm.ScopeMetrics().At(0).Metrics().All() {
			if m.Name() == runrecords.RunGoodput {
				lastGoodput = m.Gauge().DataPoints().At(m.Gauge().DataPoints().Len() - 1).DoubleValue()
				ticks++
			}
		}
		s.addMetrics(one)
	}
	require.Greater(t, ticks, 5, "nemo_steps sends goodput at every tick")
	d, ok := s.detail("golden-goodput")
	require.True(t, ok)
	g := d.GoodputDetail
	require.NotNil(t, g, "goodput from the metrics, before any record")
	assert.True(t, g.Live)
	assert.False(t, g.Final)
	assert.InDelta(t, lastGoodput, g.Goodput, 1e-9)
	var sum float64
	for _, c := range g.Categories {
		sum += c.Seconds
	}
	assert.Positive(t, sum)
	assert.InDelta(t, g.Wall, sum+g.Unsettled, 1e-6, "settled and not settled make the wall time")
	require.NotEmpty(t, g.TopRanks)
	assert.Equal(t, int64(1), g.TopRanks[0].Rank, "the straggler")
	assert.Equal(t, "node000", g.TopRanks[0].Host)

	ld, err := golden.ReadLogs(filepath.Join(goldenGoodput, "expected_logs.yaml"))
	require.NoError(t, err)
	s.addLogs(ld)
	s.addMetrics(md) // metrics after the final record change nothing
	d, _ = s.detail("golden-goodput")
	g = d.GoodputDetail
	assert.True(t, g.Final)
	assert.False(t, g.Live)
	assert.Zero(t, g.Unsettled)
	assert.Equal(t, int64(2), g.Attempts)
}
