// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemostepsprocessor"

import (
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/runrecords"
	"github.com/nemo-lens/otelcol-nemo/processor/nemostepsprocessor/internal/metadata"
)

// The per-rank step gauges.
const (
	gDuration = iota
	gBusy
	gWait
	gRelative
	gIndividual
	numGauges
)

// The variants of a gauge: the value itself (per step, or the last of the
// interval), and with interval the smallest and largest of the interval.
const (
	vLast = iota
	vMin
	vMax
	numVariants
)

// metricID indexes every metric the processor emits: a gauge and variant,
// or the stragglers count.
type metricID int

const (
	idStragglers = metricID(numGauges*numVariants) + iota
	// The stall gauges (stalls.go).
	idRunStalled
	idRunStallDuration
	idRankBehind
	// The goodput metrics (goodput.go).
	idRunTime
	idRunGoodput
	idRankStragglerTime
	numMetricIDs
)

// stallDescs describe the stall gauges. Units in braces only: the
// Prometheus exporter adds no suffix for them (a "1" would add _ratio).
var stallDescs = map[metricID]metricDesc{
	idRunStalled:       {"nemo.run.stalled", "{run}", "1 while no rank of the run has completed a step for longer than max(min_stall, stall_factor x its median step), 0 when a step completes again."},
	idRunStallDuration: {"nemo.run.stall_duration", "s", "How long the stalled run has gone without a completed step."},
	idRankBehind:       {"nemo.rank.behind", "{rank}", "1 for each rank a stall names as behind (lagging the others in the iteration that did not complete), 0 when the run resumes."},
}

// goodputDescs describe the goodput metrics; the time is in seconds.
var goodputDescs = map[metricID]metricDesc{
	idRunTime: {runrecords.RunTime, "s", "The run's wall-clock time since its first span, by where it went (nemo.time.category: productive, straggler, startup, " +
		"checkpoint_load, checkpoint_save, evaluation, stalled, lost_progress, restart, other), counted once it can no longer change category."},
	idRunGoodput: {runrecords.RunGoodput, "1", "The run's productive time over its wall-clock time so far."},
	idRankStragglerTime: {runrecords.RankStragglerTime, "s", "The time the rank cost the whole run as the slowest rank of its steps: " +
		"its busy time minus the median rank's, on every step it was the slowest (counted as the run's straggler time is)."},
}

func gaugeID(g, variant int) metricID { return metricID(g*numVariants + variant) }

type metricDesc struct{ name, unit, description string }

var gaugeDescs = [numGauges]metricDesc{
	gDuration:   {runrecords.StepDuration, "s", "Wall duration of the rank's step span."},
	gBusy:       {runrecords.StepBusyTime, "s", "The rank's step duration minus the time covered by its wait spans (gradient sync, pipeline receives)."},
	gWait:       {runrecords.StepWaitTime, "s", "The part of the rank's step covered by its wait spans: time spent waiting for the other ranks."},
	gRelative:   {runrecords.StepRelativeScore, "1", "The step's fastest busy time over this rank's: 1 for the fastest rank, 0.5 for a rank twice as slow."},
	gIndividual: {runrecords.StepIndividualScore, "1", "The rank's best busy time over its last history steps over this step's: 1 when the rank is as fast as it has recently been."},
}

var variantSuffixes = [numVariants]string{vLast: "", vMin: ".min", vMax: ".max"}

var stragglersDesc = metricDesc{
	runrecords.StepStragglers, "{step}",
	"Rank steps of the run whose relative or individual score was below its threshold, since the processor first saw the run.",
}

// pointWriter collects the data points to send at the next tick, one
// resource per run (and worker group) and service.name of the ranks. The
// resource carries the run's group attributes, so that a pipeline routing by
// resource (jsonl_file's {nemo.run.id} paths) puts the points with the run's
// other metrics; the points carry them too, so that the Prometheus exporter
// labels them without resource_to_telemetry_conversion.
//
// It cuts the points into batches of at most maxBatchPoints: a tick can
// decide many steps at once (at saturation, a thousand ranks' worth of
// steps), and one huge request would be refused whole by an exporter whose
// sending queue counts items (jsonl_file's "element size too large").
type pointWriter struct {
	md        pmetric.Metrics
	resources map[string]*resourceMetrics
	points    int // in md
	full      []batch
	key       []byte
}

// batch is a finished request of step metrics and its data points.
type batch struct {
	md     pmetric.Metrics
	points int
}

// maxBatchPoints bounds the data points of one request of step metrics.
const maxBatchPoints = 8192

type resourceMetrics struct {
	metrics pmetric.MetricSlice
	byID    [numMetricIDs]pmetric.Metric
	has     [numMetricIDs]bool
}

func newPointWriter() *pointWriter {
	return &pointWriter{md: pmetric.NewMetrics(), resources: make(map[string]*resourceMetrics)}
}

func (w *pointWriter) resource(service string, group []label) *resourceMetrics {
	// The key is built in a buffer kept across points, and looked up
	// without a copy: one allocation per resource, none per point.
	w.key = append(w.key[:0], service...)
	for _, l := range group {
		w.key = append(w.key, 0)
		w.key = append(w.key, l.key...)
		w.key = append(w.key, 0)
		if l.isNum {
			w.key = strconv.AppendInt(w.key, l.num, 10)
		} else {
			w.key = append(w.key, l.str...)
		}
	}
	if r := w.resources[string(w.key)]; r != nil {
		return r
	}
	rm := w.md.ResourceMetrics().AppendEmpty()
	attrs := rm.Resource().Attributes()
	if service != "" {
		attrs.PutStr(attrkey.ServiceName, service)
	}
	putLabels(attrs, group)
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(metadata.ScopeName)
	r := &resourceMetrics{metrics: sm.Metrics()}
	w.resources[string(w.key)] = r
	return r
}

func (r *resourceMetrics) metric(id metricID) pmetric.Metric {
	if r.has[id] {
		return r.byID[id]
	}
	m := r.metrics.AppendEmpty()
	if d, ok := goodputDescs[id]; ok {
		m.SetName(d.name)
		m.SetUnit(d.unit)
		m.SetDescription(d.description)
		if id == idRunGoodput {
			m.SetEmptyGauge()
		} else {
			sum := m.SetEmptySum()
			sum.SetIsMonotonic(true)
			sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		}
	} else if d, ok := stallDescs[id]; ok {
		m.SetName(d.name)
		m.SetUnit(d.unit)
		m.SetDescription(d.description)
		m.SetEmptyGauge()
	} else if id == idStragglers {
		m.SetName(stragglersDesc.name)
		m.SetUnit(stragglersDesc.unit)
		m.SetDescription(stragglersDesc.description)
		sum := m.SetEmptySum()
		sum.SetIsMonotonic(true)
		sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	} else {
		d := gaugeDescs[int(id)/numVariants]
		m.SetName(d.name + variantSuffixes[int(id)%numVariants])
		m.SetUnit(d.unit)
		m.SetDescription(d.description)
		m.SetEmptyGauge()
	}
	r.byID[id], r.has[id] = m, true
	return m
}

// gauge adds one rank's data point and returns it.
func (w *pointWriter) gauge(id metricID, l *rankLabels, ts int64, v float64) pmetric.NumberDataPoint {
	dp := w.resource(l.service, l.group).metric(id).Gauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(pcommon.Timestamp(ts))
	dp.SetDoubleValue(v)
	attrs := dp.Attributes()
	attrs.EnsureCapacity(len(l.group) + len(l.node))
	putLabels(attrs, l.group)
	putLabels(attrs, l.node)
	w.added()
	return dp
}

// runGauge adds one run's stall point, with its group labels and the kind.
func (w *pointWriter) runGauge(id metricID, l *rankLabels, ts int64, v float64, kind string) {
	dp := w.resource(l.service, l.group).metric(id).Gauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(pcommon.Timestamp(ts))
	dp.SetDoubleValue(v)
	putLabels(dp.Attributes(), l.group)
	dp.Attributes().PutStr(attrStallKind, kind)
	w.added()
}

// stragglers adds a run's cumulative straggler count.
func (w *pointWriter) stragglers(run *runCount) {
	dp := w.resource(run.service, run.group).metric(idStragglers).Sum().DataPoints().AppendEmpty()
	dp.SetStartTimestamp(pcommon.Timestamp(run.start))
	dp.SetTimestamp(pcommon.Timestamp(run.last))
	dp.SetIntValue(run.count)
	putLabels(dp.Attributes(), run.group)
	w.added()
}

// runTime adds a run's cumulative time of one category, in seconds.
func (w *pointWriter) runTime(l *rankLabels, start, ts int64, category string, secs float64) {
	dp := w.resource(l.service, l.group).metric(idRunTime).Sum().DataPoints().AppendEmpty()
	dp.SetStartTimestamp(pcommon.Timestamp(start))
	dp.SetTimestamp(pcommon.Timestamp(ts))
	dp.SetDoubleValue(secs)
	putLabels(dp.Attributes(), l.group)
	dp.Attributes().PutStr(attrTimeCategory, category)
	w.added()
}

// runGoodput adds a run's goodput.
func (w *pointWriter) runGoodput(l *rankLabels, ts int64, v float64) {
	dp := w.resource(l.service, l.group).metric(idRunGoodput).Gauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(pcommon.Timestamp(ts))
	dp.SetDoubleValue(v)
	putLabels(dp.Attributes(), l.group)
	w.added()
}

// rankStraggler adds a rank's cumulative straggler time, in seconds.
func (w *pointWriter) rankStraggler(l *rankLabels, start, ts int64, secs float64) {
	dp := w.resource(l.service, l.group).metric(idRankStragglerTime).Sum().DataPoints().AppendEmpty()
	dp.SetStartTimestamp(pcommon.Timestamp(start))
	dp.SetTimestamp(pcommon.Timestamp(ts))
	dp.SetDoubleValue(secs)
	attrs := dp.Attributes()
	attrs.EnsureCapacity(len(l.group) + len(l.node))
	putLabels(attrs, l.group)
	putLabels(attrs, l.node)
	w.added()
}

// added counts a point and starts a new batch when this one is full.
func (w *pointWriter) added() {
	w.points++
	if w.points >= maxBatchPoints {
		w.full = append(w.full, batch{md: w.md, points: w.points})
		w.md, w.points = pmetric.NewMetrics(), 0
		clear(w.resources)
	}
}

// take returns the batches collected and starts over.
func (w *pointWriter) take() []batch {
	out := w.full
	if w.points > 0 {
		out = append(out, batch{md: w.md, points: w.points})
		w.md, w.points = pmetric.NewMetrics(), 0
		clear(w.resources)
	}
	w.full = nil
	return out
}
