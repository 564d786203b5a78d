// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package pdatautil // import "github.com/nemo-lens/otelcol-nemo/internal/pdatautil"

import (
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// CountSpans counts the spans of one resource, as ptrace.Traces.SpanCount
// does for a whole batch.
func CountSpans(rs ptrace.ResourceSpans) int {
	n := 0
	sss := rs.ScopeSpans()
	for i := 0; i < sss.Len(); i++ {
		n += sss.At(i).Spans().Len()
	}
	return n
}

// CountLogRecords counts the log records of one resource.
func CountLogRecords(rl plog.ResourceLogs) int {
	n := 0
	sls := rl.ScopeLogs()
	for i := 0; i < sls.Len(); i++ {
		n += sls.At(i).LogRecords().Len()
	}
	return n
}

// CountDataPoints counts like the collector's own item counters for metrics:
// data points, summed per metric without visiting the points.
func CountDataPoints(rm pmetric.ResourceMetrics) int {
	n := 0
	sms := rm.ScopeMetrics()
	for i := 0; i < sms.Len(); i++ {
		ms := sms.At(i).Metrics()
		for j := 0; j < ms.Len(); j++ {
			m := ms.At(j)
			switch m.Type() {
			case pmetric.MetricTypeGauge:
				n += m.Gauge().DataPoints().Len()
			case pmetric.MetricTypeSum:
				n += m.Sum().DataPoints().Len()
			case pmetric.MetricTypeHistogram:
				n += m.Histogram().DataPoints().Len()
			case pmetric.MetricTypeExponentialHistogram:
				n += m.ExponentialHistogram().DataPoints().Len()
			case pmetric.MetricTypeSummary:
				n += m.Summary().DataPoints().Len()
			}
		}
	}
	return n
}
