// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemostepsprocessor"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/nemo-lens/otelcol-nemo/internal/runrecords"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
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

// pointWriter records the data points to send at the next tick, under the
// engine's lock; they become pdata only as they are sent, outside it, one
// request at a time (pointBatches, batches.go).
//
// Recording rather than building them at once bounds a tick's memory. Ranks
// export every few seconds, each request with several steps, so steps
// complete in waves: at 1,000 ranks sending 25 steps per request, a wave is
// 25,000 rank steps and 125,000 points, about 48 MB as pdata, all alive at
// once if built when decided. Recorded, a rank step's five gauges are one
// record of about 200 bytes, and one request of at most maxBatchPoints
// points is built at a time, sent before the next.
//
// The records grow in blocks of pointBlock, never copied: a wave's records,
// grown as one slice, would be copied a dozen times on the way and
// allocated twice over.
type pointWriter struct {
	blocks [][]pendingPoint
}

// pointBlock is how many records a block holds.
const pointBlock = 1024

// add records a point.
func (w *pointWriter) add(p pendingPoint) {
	n := len(w.blocks)
	switch {
	case n == 0:
		w.blocks = append(w.blocks, nil) // grown by append: a quiet tick records a few points
		n = 1
	case len(w.blocks[n-1]) == pointBlock:
		w.blocks = append(w.blocks, make([]pendingPoint, 0, pointBlock))
		n++
	}
	w.blocks[n-1] = append(w.blocks[n-1], p)
}

// pendingPoint is one recorded data point, or a rank step's gauges.
type pendingPoint struct {
	id metricID
	// step: the record is a rank step's gauges, values in gauge order
	// (ids gaugeID(g, vLast)); its busy time point carries an exemplar of
	// the step: the iteration and the rank's step span.
	step      bool
	iteration int64
	traceID   pcommon.TraceID
	spanID    pcommon.SpanID
	// service and group are the point's resource; the point's attributes
	// are group, node and, unless "", attrKey=attrVal.
	service          string
	group, node      []label
	attrKey, attrVal string
	start, ts        int64
	// values[0] is a single point's value; count the stragglers count's.
	values [numGauges]float64
	count  int64
}

func newPointWriter() *pointWriter { return &pointWriter{} }

// gauge records one rank's gauge point.
func (w *pointWriter) gauge(id metricID, l *rankLabels, ts int64, v float64) {
	w.add(pendingPoint{id: id, service: l.service, group: l.group, node: l.node, ts: ts, values: [numGauges]float64{v}})
}

// stepGauges records a rank step's gauges, ending at ts, of the step
// iteration whose step span r is.
func (w *pointWriter) stepGauges(l *rankLabels, ts int64, v stepValues, iteration int64, r *steps.RankStep) {
	w.add(pendingPoint{
		step: true, iteration: iteration, traceID: r.TraceID, spanID: r.SpanID,
		service: l.service, group: l.group, node: l.node, ts: ts, values: v,
	})
}

// runGauge records one run's stall point, with its group labels and the kind.
func (w *pointWriter) runGauge(id metricID, l *rankLabels, ts int64, v float64, kind string) {
	w.add(pendingPoint{id: id, service: l.service, group: l.group, attrKey: attrStallKind, attrVal: kind, ts: ts, values: [numGauges]float64{v}})
}

// stragglers records a run's cumulative straggler count.
func (w *pointWriter) stragglers(run *runCount) {
	w.add(pendingPoint{id: idStragglers, service: run.service, group: run.group, start: run.start, ts: run.last, count: run.count})
}

// runTime records a run's cumulative time of one category, in seconds.
func (w *pointWriter) runTime(l *rankLabels, start, ts int64, category string, secs float64) {
	w.add(pendingPoint{
		id: idRunTime, service: l.service, group: l.group, attrKey: attrTimeCategory, attrVal: category,
		start: start, ts: ts, values: [numGauges]float64{secs},
	})
}

// runGoodput records a run's goodput.
func (w *pointWriter) runGoodput(l *rankLabels, ts int64, v float64) {
	w.add(pendingPoint{id: idRunGoodput, service: l.service, group: l.group, ts: ts, values: [numGauges]float64{v}})
}

// rankStraggler records a rank's cumulative straggler time, in seconds.
func (w *pointWriter) rankStraggler(l *rankLabels, start, ts int64, secs float64) {
	w.add(pendingPoint{
		id: idRankStragglerTime, service: l.service, group: l.group, node: l.node,
		start: start, ts: ts, values: [numGauges]float64{secs},
	})
}

// take returns the points recorded and starts over.
func (w *pointWriter) take() pointBatches {
	p := pointBatches{blocks: w.blocks}
	w.blocks = nil
	return p
}
