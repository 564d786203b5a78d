// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter"

import (
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// recordEncoder turns pdata into JSON Lines, one record per span, metric data
// point or log record. It keeps the encoded resource and scope of the batch
// being written, so each is encoded once and copied into every record that
// belongs to it. A recordEncoder is not safe for concurrent use; the exporter
// pools them.
type recordEncoder struct {
	resource []byte // `"resource":{...}` of the current resource
	scope    []byte // `"scope":{...}` of the current scope
	head     []byte // `{"name":...,"unit":...,"type":...` of the current metric
}

func (e *recordEncoder) setResource(r pcommon.Resource) {
	e.resource = append(e.resource[:0], `"resource":`...)
	e.resource = appendAttributes(e.resource, r.Attributes())
}

func (e *recordEncoder) setScope(s pcommon.InstrumentationScope) {
	e.scope = append(e.scope[:0], `"scope":{"name":`...)
	e.scope = appendJSONString(e.scope, s.Name())
	e.scope = append(e.scope, `,"version":`...)
	e.scope = appendJSONString(e.scope, s.Version())
	e.scope = append(e.scope, '}')
}

// endRecord closes a record with its resource and scope and the newline.
func (e *recordEncoder) endRecord(dst []byte) []byte {
	dst = append(dst, ',')
	dst = append(dst, e.resource...)
	dst = append(dst, ',')
	dst = append(dst, e.scope...)
	return append(dst, '}', '\n')
}

// appendResourceSpans appends one line per span of rs and returns the number
// of records written.
func (e *recordEncoder) appendResourceSpans(dst []byte, rs ptrace.ResourceSpans) ([]byte, int) {
	e.setResource(rs.Resource())
	n := 0
	sss := rs.ScopeSpans()
	for i := 0; i < sss.Len(); i++ {
		ss := sss.At(i)
		e.setScope(ss.Scope())
		spans := ss.Spans()
		for j := 0; j < spans.Len(); j++ {
			dst = e.appendSpan(dst, spans.At(j))
		}
		n += spans.Len()
	}
	return dst, n
}

// spanKindName follows the Python SDK's str(SpanKind.X), matching the
// "StatusCode.X" form the NeMo Lens span exporter uses for status.
func spanKindName(k ptrace.SpanKind) string {
	switch k {
	case ptrace.SpanKindInternal:
		return "SpanKind.INTERNAL"
	case ptrace.SpanKindServer:
		return "SpanKind.SERVER"
	case ptrace.SpanKindClient:
		return "SpanKind.CLIENT"
	case ptrace.SpanKindProducer:
		return "SpanKind.PRODUCER"
	case ptrace.SpanKindConsumer:
		return "SpanKind.CONSUMER"
	default:
		return "SpanKind.UNSPECIFIED"
	}
}

// statusName is str(StatusCode.X) as the NeMo Lens span exporter wrote it.
func statusName(c ptrace.StatusCode) string {
	switch c {
	case ptrace.StatusCodeOk:
		return "StatusCode.OK"
	case ptrace.StatusCodeError:
		return "StatusCode.ERROR"
	default:
		return "StatusCode.UNSET"
	}
}

func (e *recordEncoder) appendSpan(dst []byte, s ptrace.Span) []byte {
	dst = append(dst, `{"name":`...)
	dst = appendJSONString(dst, s.Name())
	tid := s.TraceID()
	dst = append(dst, `,"trace_id":`...)
	dst = appendHexID(dst, tid[:])
	sid := s.SpanID()
	dst = append(dst, `,"span_id":`...)
	dst = appendHexID(dst, sid[:])
	dst = append(dst, `,"parent_id":`...)
	if pid := s.ParentSpanID(); pid.IsEmpty() {
		dst = append(dst, "null"...)
	} else {
		dst = appendHexID(dst, pid[:])
	}
	dst = append(dst, `,"kind":"`...)
	dst = append(dst, spanKindName(s.Kind())...)
	dst = append(dst, `","start_time_unix_nano":`...)
	dst = strconv.AppendUint(dst, uint64(s.StartTimestamp()), 10)
	dst = append(dst, `,"end_time_unix_nano":`...)
	dst = strconv.AppendUint(dst, uint64(s.EndTimestamp()), 10)
	dst = append(dst, `,"status":"`...)
	dst = append(dst, statusName(s.Status().Code())...)
	dst = append(dst, `","status_message":`...)
	dst = appendJSONString(dst, s.Status().Message())
	dst = append(dst, `,"attributes":`...)
	dst = appendAttributes(dst, s.Attributes())

	dst = append(dst, `,"events":[`...)
	events := s.Events()
	for i := 0; i < events.Len(); i++ {
		ev := events.At(i)
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"name":`...)
		dst = appendJSONString(dst, ev.Name())
		dst = append(dst, `,"time_unix_nano":`...)
		dst = strconv.AppendUint(dst, uint64(ev.Timestamp()), 10)
		dst = append(dst, `,"attributes":`...)
		dst = appendAttributes(dst, ev.Attributes())
		dst = appendDropped(dst, `,"dropped_attributes_count":`, ev.DroppedAttributesCount())
		dst = append(dst, '}')
	}
	dst = append(dst, `],"links":[`...)
	links := s.Links()
	for i := 0; i < links.Len(); i++ {
		l := links.At(i)
		if i > 0 {
			dst = append(dst, ',')
		}
		ltid := l.TraceID()
		dst = append(dst, `{"trace_id":`...)
		dst = appendHexID(dst, ltid[:])
		lsid := l.SpanID()
		dst = append(dst, `,"span_id":`...)
		dst = appendHexID(dst, lsid[:])
		dst = append(dst, `,"attributes":`...)
		dst = appendAttributes(dst, l.Attributes())
		dst = appendDropped(dst, `,"dropped_attributes_count":`, l.DroppedAttributesCount())
		dst = append(dst, '}')
	}
	dst = append(dst, ']')
	dst = appendDropped(dst, `,"dropped_attributes_count":`, s.DroppedAttributesCount())
	dst = appendDropped(dst, `,"dropped_events_count":`, s.DroppedEventsCount())
	dst = appendDropped(dst, `,"dropped_links_count":`, s.DroppedLinksCount())
	return e.endRecord(dst)
}

// appendDropped appends key and n only when n is not zero: the dropped
// counts are rare and would otherwise bloat every line.
func appendDropped(dst []byte, key string, n uint32) []byte {
	if n == 0 {
		return dst
	}
	dst = append(dst, key...)
	return strconv.AppendUint(dst, uint64(n), 10)
}

// appendResourceMetrics appends one line per data point of rm and returns
// the number of records written.
func (e *recordEncoder) appendResourceMetrics(dst []byte, rm pmetric.ResourceMetrics) ([]byte, int) {
	e.setResource(rm.Resource())
	n := 0
	sms := rm.ScopeMetrics()
	for i := 0; i < sms.Len(); i++ {
		sm := sms.At(i)
		e.setScope(sm.Scope())
		ms := sm.Metrics()
		for j := 0; j < ms.Len(); j++ {
			var c int
			dst, c = e.appendMetric(dst, ms.At(j))
			n += c
		}
	}
	return dst, n
}

func (e *recordEncoder) setMetricHead(m pmetric.Metric, typ string) {
	e.head = append(e.head[:0], `{"name":`...)
	e.head = appendJSONString(e.head, m.Name())
	e.head = append(e.head, `,"unit":`...)
	e.head = appendJSONString(e.head, m.Unit())
	e.head = append(e.head, `,"type":"`...)
	e.head = append(e.head, typ...)
	e.head = append(e.head, '"')
}

func temporalityName(t pmetric.AggregationTemporality) string {
	switch t {
	case pmetric.AggregationTemporalityCumulative:
		return "cumulative"
	case pmetric.AggregationTemporalityDelta:
		return "delta"
	default:
		return "unspecified"
	}
}

func (e *recordEncoder) appendMetric(dst []byte, m pmetric.Metric) ([]byte, int) {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		e.setMetricHead(m, "gauge")
		dps := m.Gauge().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dst = e.appendNumberPoint(dst, dps.At(i))
			dst = e.endRecord(dst)
		}
		return dst, dps.Len()
	case pmetric.MetricTypeSum:
		e.setMetricHead(m, "sum")
		sum := m.Sum()
		dps := sum.DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dst = e.appendNumberPoint(dst, dps.At(i))
			dst = appendTemporality(dst, sum.AggregationTemporality())
			dst = append(dst, `,"monotonic":`...)
			dst = strconv.AppendBool(dst, sum.IsMonotonic())
			dst = e.endRecord(dst)
		}
		return dst, dps.Len()
	case pmetric.MetricTypeHistogram:
		e.setMetricHead(m, "histogram")
		h := m.Histogram()
		dps := h.DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dst = e.appendHistogramPoint(dst, dps.At(i))
			dst = appendTemporality(dst, h.AggregationTemporality())
			dst = e.endRecord(dst)
		}
		return dst, dps.Len()
	case pmetric.MetricTypeExponentialHistogram:
		e.setMetricHead(m, "exponential_histogram")
		h := m.ExponentialHistogram()
		dps := h.DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dst = e.appendExponentialHistogramPoint(dst, dps.At(i))
			dst = appendTemporality(dst, h.AggregationTemporality())
			dst = e.endRecord(dst)
		}
		return dst, dps.Len()
	case pmetric.MetricTypeSummary:
		e.setMetricHead(m, "summary")
		dps := m.Summary().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dst = e.appendSummaryPoint(dst, dps.At(i))
			dst = e.endRecord(dst)
		}
		return dst, dps.Len()
	default:
		// A metric without a type carries no data points.
		return dst, 0
	}
}

func appendTemporality(dst []byte, t pmetric.AggregationTemporality) []byte {
	dst = append(dst, `,"temporality":"`...)
	dst = append(dst, temporalityName(t)...)
	return append(dst, '"')
}

// appendPointHead appends the fields every data point record starts with.
func (e *recordEncoder) appendPointHead(dst []byte, ts, start pcommon.Timestamp, attrs pcommon.Map, flags pmetric.DataPointFlags) []byte {
	dst = append(dst, e.head...)
	dst = append(dst, `,"time_unix_nano":`...)
	dst = strconv.AppendUint(dst, uint64(ts), 10)
	dst = append(dst, `,"start_time_unix_nano":`...)
	dst = strconv.AppendUint(dst, uint64(start), 10)
	dst = append(dst, `,"attributes":`...)
	dst = appendAttributes(dst, attrs)
	if flags.NoRecordedValue() {
		dst = append(dst, `,"no_recorded_value":true`...)
	}
	return dst
}

func (e *recordEncoder) appendNumberPoint(dst []byte, dp pmetric.NumberDataPoint) []byte {
	dst = e.appendPointHead(dst, dp.Timestamp(), dp.StartTimestamp(), dp.Attributes(), dp.Flags())
	dst = append(dst, `,"value":`...)
	switch dp.ValueType() {
	case pmetric.NumberDataPointValueTypeInt:
		return strconv.AppendInt(dst, dp.IntValue(), 10)
	case pmetric.NumberDataPointValueTypeDouble:
		return appendJSONFloat(dst, dp.DoubleValue())
	default:
		return append(dst, "null"...)
	}
}

// appendOptionalFloat appends key and v only when the point has the value.
func appendOptionalFloat(dst []byte, key string, has bool, v float64) []byte {
	if !has {
		return dst
	}
	dst = append(dst, key...)
	return appendJSONFloat(dst, v)
}

func (e *recordEncoder) appendHistogramPoint(dst []byte, dp pmetric.HistogramDataPoint) []byte {
	dst = e.appendPointHead(dst, dp.Timestamp(), dp.StartTimestamp(), dp.Attributes(), dp.Flags())
	dst = append(dst, `,"count":`...)
	dst = strconv.AppendUint(dst, dp.Count(), 10)
	dst = appendOptionalFloat(dst, `,"sum":`, dp.HasSum(), dp.Sum())
	dst = appendOptionalFloat(dst, `,"min":`, dp.HasMin(), dp.Min())
	dst = appendOptionalFloat(dst, `,"max":`, dp.HasMax(), dp.Max())
	dst = append(dst, `,"bucket_counts":`...)
	dst = appendUintArray(dst, dp.BucketCounts())
	dst = append(dst, `,"explicit_bounds":`...)
	return appendFloatArray(dst, dp.ExplicitBounds())
}

func appendBuckets(dst []byte, b pmetric.ExponentialHistogramDataPointBuckets) []byte {
	dst = append(dst, `{"offset":`...)
	dst = strconv.AppendInt(dst, int64(b.Offset()), 10)
	dst = append(dst, `,"bucket_counts":`...)
	dst = appendUintArray(dst, b.BucketCounts())
	return append(dst, '}')
}

func (e *recordEncoder) appendExponentialHistogramPoint(dst []byte, dp pmetric.ExponentialHistogramDataPoint) []byte {
	dst = e.appendPointHead(dst, dp.Timestamp(), dp.StartTimestamp(), dp.Attributes(), dp.Flags())
	dst = append(dst, `,"count":`...)
	dst = strconv.AppendUint(dst, dp.Count(), 10)
	dst = appendOptionalFloat(dst, `,"sum":`, dp.HasSum(), dp.Sum())
	dst = appendOptionalFloat(dst, `,"min":`, dp.HasMin(), dp.Min())
	dst = appendOptionalFloat(dst, `,"max":`, dp.HasMax(), dp.Max())
	dst = append(dst, `,"scale":`...)
	dst = strconv.AppendInt(dst, int64(dp.Scale()), 10)
	dst = append(dst, `,"zero_count":`...)
	dst = strconv.AppendUint(dst, dp.ZeroCount(), 10)
	dst = append(dst, `,"zero_threshold":`...)
	dst = appendJSONFloat(dst, dp.ZeroThreshold())
	dst = append(dst, `,"positive":`...)
	dst = appendBuckets(dst, dp.Positive())
	dst = append(dst, `,"negative":`...)
	return appendBuckets(dst, dp.Negative())
}

func (e *recordEncoder) appendSummaryPoint(dst []byte, dp pmetric.SummaryDataPoint) []byte {
	dst = e.appendPointHead(dst, dp.Timestamp(), dp.StartTimestamp(), dp.Attributes(), dp.Flags())
	dst = append(dst, `,"count":`...)
	dst = strconv.AppendUint(dst, dp.Count(), 10)
	dst = append(dst, `,"sum":`...)
	dst = appendJSONFloat(dst, dp.Sum())
	dst = append(dst, `,"quantiles":[`...)
	qs := dp.QuantileValues()
	for i := 0; i < qs.Len(); i++ {
		q := qs.At(i)
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"quantile":`...)
		dst = appendJSONFloat(dst, q.Quantile())
		dst = append(dst, `,"value":`...)
		dst = appendJSONFloat(dst, q.Value())
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// appendResourceLogs appends one line per log record of rl and returns the
// number of records written.
func (e *recordEncoder) appendResourceLogs(dst []byte, rl plog.ResourceLogs) ([]byte, int) {
	e.setResource(rl.Resource())
	n := 0
	sls := rl.ScopeLogs()
	for i := 0; i < sls.Len(); i++ {
		sl := sls.At(i)
		e.setScope(sl.Scope())
		lrs := sl.LogRecords()
		for j := 0; j < lrs.Len(); j++ {
			dst = e.appendLogRecord(dst, lrs.At(j))
		}
		n += lrs.Len()
	}
	return dst, n
}

func (e *recordEncoder) appendLogRecord(dst []byte, lr plog.LogRecord) []byte {
	dst = append(dst, `{"time_unix_nano":`...)
	dst = strconv.AppendUint(dst, uint64(lr.Timestamp()), 10)
	dst = append(dst, `,"observed_time_unix_nano":`...)
	dst = strconv.AppendUint(dst, uint64(lr.ObservedTimestamp()), 10)
	dst = append(dst, `,"severity_number":`...)
	dst = strconv.AppendInt(dst, int64(lr.SeverityNumber()), 10)
	dst = append(dst, `,"severity_text":`...)
	dst = appendJSONString(dst, lr.SeverityText())
	dst = append(dst, `,"body":`...)
	dst = appendValue(dst, lr.Body(), 0)
	dst = append(dst, `,"attributes":`...)
	dst = appendAttributes(dst, lr.Attributes())
	dst = append(dst, `,"trace_id":`...)
	if tid := lr.TraceID(); tid.IsEmpty() {
		dst = append(dst, "null"...)
	} else {
		dst = appendHexID(dst, tid[:])
	}
	dst = append(dst, `,"span_id":`...)
	if sid := lr.SpanID(); sid.IsEmpty() {
		dst = append(dst, "null"...)
	} else {
		dst = appendHexID(dst, sid[:])
	}
	if name := lr.EventName(); name != "" {
		dst = append(dst, `,"event_name":`...)
		dst = appendJSONString(dst, name)
	}
	dst = appendDropped(dst, `,"dropped_attributes_count":`, lr.DroppedAttributesCount())
	return e.endRecord(dst)
}
