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

// pointBatches are a tick's recorded points (pointWriter.take), built into
// requests as they are sent (all).
type pointBatches struct {
	blocks [][]pendingPoint
}

// batch is a built request of step metrics and its data points.
type batch struct {
	md     pmetric.Metrics
	points int
}

// maxBatchPoints bounds the data points of one request of step metrics: a
// tick can decide many steps at once (at saturation, a thousand ranks' worth
// of steps), and one huge request would be refused whole by an exporter
// whose sending queue counts items (jsonl_file's "element size too large").
const maxBatchPoints = 8192

// all builds the points into requests of at most maxBatchPoints points and
// yields each one as soon as it is full, before building the next: one
// resource per run (and worker group) and service.name of the ranks. The
// resource carries the run's group attributes, so that a pipeline routing by
// resource (jsonl_file's {nemo.run.id} paths) puts the points with the run's
// other metrics; the points carry them too, so that the Prometheus exporter
// labels them without resource_to_telemetry_conversion.
func (p pointBatches) all(yield func(batch) bool) {
	b := newBuilder()
	for _, block := range p.blocks {
		if !b.addAll(block, yield) {
			return
		}
	}
	if b.points > 0 {
		yield(batch{md: b.md, points: b.points})
	}
}

// stepExemplar ties a rank step's busy time point to its step: the
// exemplar holds the iteration and the rank's step span, so that a reader
// (the nemo_view page) places the point in its step without a per-iteration
// series.
func stepExemplar(dp pmetric.NumberDataPoint, pp *pendingPoint) {
	ex := dp.Exemplars().AppendEmpty()
	ex.SetTimestamp(dp.Timestamp())
	ex.SetDoubleValue(dp.DoubleValue())
	ex.SetTraceID(pp.traceID)
	ex.SetSpanID(pp.spanID)
	ex.FilteredAttributes().PutInt(runrecords.StepIteration, pp.iteration)
}

// builder builds one request at a time.
type builder struct {
	md        pmetric.Metrics
	resources map[string]*resourceMetrics
	points    int // in md
	key       []byte
}

type resourceMetrics struct {
	metrics pmetric.MetricSlice
	byID    [numMetricIDs]pmetric.Metric
	has     [numMetricIDs]bool
}

func newBuilder() *builder {
	return &builder{md: pmetric.NewMetrics(), resources: make(map[string]*resourceMetrics)}
}

// point adds the point of metric id and value v that pp records (the
// stragglers count has its own, an int).
func (b *builder) point(pp *pendingPoint, id metricID, v float64) pmetric.NumberDataPoint {
	m := b.resource(pp.service, pp.group).metric(id)
	var dp pmetric.NumberDataPoint
	if m.Type() == pmetric.MetricTypeSum {
		dp = m.Sum().DataPoints().AppendEmpty()
	} else {
		dp = m.Gauge().DataPoints().AppendEmpty()
	}
	dp.SetStartTimestamp(pcommon.Timestamp(pp.start))
	dp.SetTimestamp(pcommon.Timestamp(pp.ts))
	if id == idStragglers {
		dp.SetIntValue(pp.count)
	} else {
		dp.SetDoubleValue(v)
	}
	attrs := dp.Attributes()
	n := len(pp.group) + len(pp.node)
	if pp.attrKey != "" {
		n++
	}
	attrs.EnsureCapacity(n)
	putLabels(attrs, pp.group)
	putLabels(attrs, pp.node)
	if pp.attrKey != "" {
		attrs.PutStr(pp.attrKey, pp.attrVal)
	}
	return dp
}

// added counts a point and, when the request is full, yields it and starts
// the next. It reports whether to go on.
func (b *builder) added(yield func(batch) bool) bool {
	b.points++
	if b.points < maxBatchPoints {
		return true
	}
	full := batch{md: b.md, points: b.points}
	b.md, b.points = pmetric.NewMetrics(), 0
	clear(b.resources)
	return yield(full)
}

// addAll builds the points of a block of records, yielding each request as
// it is full. It reports whether to go on.
func (b *builder) addAll(block []pendingPoint, yield func(batch) bool) bool {
	for i := range block {
		pp := &block[i]
		if !pp.step {
			b.point(pp, pp.id, pp.values[0])
			if !b.added(yield) {
				return false
			}
			continue
		}
		for g := range numGauges {
			dp := b.point(pp, gaugeID(g, vLast), pp.values[g])
			if g == gBusy {
				stepExemplar(dp, pp)
			}
			if !b.added(yield) {
				return false
			}
		}
	}
	return true
}

func (b *builder) resource(service string, group []label) *resourceMetrics {
	// The key is built in a buffer kept across points, and looked up
	// without a copy: one allocation per resource, none per point.
	b.key = append(b.key[:0], service...)
	for _, l := range group {
		b.key = append(b.key, 0)
		b.key = append(b.key, l.key...)
		b.key = append(b.key, 0)
		if l.isNum {
			b.key = strconv.AppendInt(b.key, l.num, 10)
		} else {
			b.key = append(b.key, l.str...)
		}
	}
	if r := b.resources[string(b.key)]; r != nil {
		return r
	}
	rm := b.md.ResourceMetrics().AppendEmpty()
	attrs := rm.Resource().Attributes()
	if service != "" {
		attrs.PutStr(attrkey.ServiceName, service)
	}
	putLabels(attrs, group)
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(metadata.ScopeName)
	r := &resourceMetrics{metrics: sm.Metrics()}
	b.resources[string(b.key)] = r
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
