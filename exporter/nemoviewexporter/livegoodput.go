// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemoviewexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/nemoviewexporter"

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
	"github.com/nemo-lens/otelcol-nemo/internal/runrecords"
)

// liveGoodput is what nemo_steps' goodput metrics, sent at every tick,
// say of a run between its goodput records (every goodput interval): the
// goodput so far, the time settled by category, the run's extent, and
// each rank's straggler time. The page shows goodput from them from the
// run's first decided step on.
type liveGoodput struct {
	id      runIdentity
	service string
	goodput float64
	has     bool
	// first is the run's first span (the sums' start), last its latest
	// span end (the goodput gauge's time), Unix ns.
	first, last int64
	settled     map[string]float64
	ranks       map[int64]topRank
}

// liveBatch gathers a batch's goodput metrics by run key.
type liveBatch map[string]*liveGoodput

// add takes m if it is one of the goodput metrics; it reports whether it
// was.
func (b liveBatch) add(m pmetric.Metric, resource pcommon.Map, service string) bool {
	switch {
	case m.Name() == runrecords.RunGoodput && m.Type() == pmetric.MetricTypeGauge:
		for _, dp := range m.Gauge().DataPoints().All() {
			if l := b.of(dp.Attributes(), resource, service); l != nil {
				l.goodput, l.has, l.last = pointValue(dp), true, int64(dp.Timestamp())
			}
		}
	case m.Name() == runrecords.RunTime && m.Type() == pmetric.MetricTypeSum:
		for _, dp := range m.Sum().DataPoints().All() {
			if l := b.of(dp.Attributes(), resource, service); l != nil {
				l.settled[str(dp.Attributes(), runrecords.TimeCategory)] = pointValue(dp)
				l.first = int64(dp.StartTimestamp())
			}
		}
	case m.Name() == runrecords.RankStragglerTime && m.Type() == pmetric.MetricTypeSum:
		for _, dp := range m.Sum().DataPoints().All() {
			l := b.of(dp.Attributes(), resource, service)
			rank, _, status := rankattr.Lookup(dp.Attributes(), rankKeys)
			if l != nil && status == rankattr.Valid {
				l.ranks[rank] = topRank{rank: rank, host: str(dp.Attributes(), attrkey.HostName), seconds: pointValue(dp)}
			}
		}
	default:
		return false
	}
	return true
}

func (b liveBatch) of(attrs, resource pcommon.Map, service string) *liveGoodput {
	id, ok := identityOf(attrs, resource)
	if !ok {
		return nil
	}
	l := b[id.key()]
	if l == nil {
		l = &liveGoodput{id: id, service: service, settled: map[string]float64{}, ranks: map[int64]topRank{}}
		b[id.key()] = l
	}
	return l
}

// longer says the metrics' wall time exceeds wall seconds.
func (l *liveGoodput) longer(wall float64) bool {
	return l.first > 0 && float64(l.last-l.first)/1e9 > wall+1e-6
}

func pointValue(dp pmetric.NumberDataPoint) float64 {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
		return float64(dp.IntValue())
	}
	return dp.DoubleValue()
}

// maxTopRanks is how many ranks the page lists by straggler time, as
// the goodput record names them.
const maxTopRanks = 5

// addLive updates a run's goodput with what its metrics say now, unless
// its final record came and the run did not go on since: the goodput so far and the wall time from its
// first to its latest span; the time by category as settled (the rest of
// the wall time is not settled yet: steps since the last checkpoint save
// may still be lost); the ranks that cost the most straggler time. The
// attempts and the message stay those of the last record; at is now.
func (r *run) addLive(l *liveGoodput, at time.Time) {
	g := r.goodput
	if g != nil && g.final && !l.longer(g.wall) {
		return // the final record stands, unless the run went on (a relaunch)
	}
	if g == nil {
		g = &goodputInfo{categories: map[string]float64{}}
		r.goodput = g
	}
	g.live, g.final, g.at = true, false, at
	if l.has {
		g.goodput = l.goodput
	}
	if len(l.settled) > 0 {
		g.categories = maps.Clone(l.settled)
	}
	if l.first > 0 && l.last > l.first {
		g.wall = float64(l.last-l.first) / 1e9
	}
	var settled float64
	for _, v := range g.categories {
		settled += v
	}
	g.unsettled = max(0, g.wall-settled)
	if len(l.ranks) > 0 {
		top := slices.Collect(maps.Values(l.ranks))
		slices.SortFunc(top, func(a, b topRank) int {
			if c := cmp.Compare(b.seconds, a.seconds); c != 0 {
				return c
			}
			return cmp.Compare(a.rank, b.rank)
		})
		top = slices.DeleteFunc(top, func(t topRank) bool { return t.seconds <= 0 })
		g.top = top[:min(len(top), maxTopRanks)]
	}
}
