// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package lensfixture

import (
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
)

// Megatron-LM's training metrics, one point each per step and rank.
const (
	StepDurationMetric = "megatron.training.step_duration_ms" // histogram, ms
	LossMetric         = "megatron.training.loss"
	TFLOPSMetric       = "megatron.training.throughput_tflops"
	TokensPerSecMetric = "megatron.training.tokens_per_sec"
	GradNormMetric     = "megatron.training.grad_norm"
	LearningRateMetric = "megatron.training.learning_rate"
	MemoryMetric       = "megatron.training.memory_allocated_gb" // GBy
	SkippedItersMetric = "megatron.training.skipped_iters"       // monotonic counter
)

// Gauges are the training metrics sent as gauges.
var Gauges = []string{LossMetric, TFLOPSMetric, TokensPerSecMetric, GradNormMetric, LearningRateMetric, MemoryMetric}

// MetricsPerStep is the number of points a rank reports per step: the
// gauges, the step-duration histogram and the skipped-iterations counter.
const MetricsPerStep = 8

// Loss is the loss a run reports on iteration: falling as training goes.
func Loss(iteration int64) float64 { return 2.0 + 8.0/float64(iteration+2) }

// AppendMetrics appends rank's training metrics of iteration to dst, each
// stamped at the step's end.
func (r Run) AppendMetrics(dst pmetric.MetricSlice, rank Rank, iteration int64) {
	step := r.StepOf(rank.Rank, iteration)
	start := r.StepStart(iteration)
	ts := pcommon.NewTimestampFromTime(start.Add(step.Duration()))
	values := map[string]float64{
		LossMetric: Loss(iteration), TFLOPSMetric: 185, GradNormMetric: 1.25, LearningRateMetric: 3e-4, MemoryMetric: 61.5,
		TokensPerSecMetric: 4096 / step.Duration().Seconds(),
	}
	for _, name := range Gauges {
		m := dst.AppendEmpty()
		m.SetName(name)
		if name == MemoryMetric {
			m.SetUnit("GBy")
		}
		dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(ts)
		dp.SetDoubleValue(values[name])
	}
	h := dst.AppendEmpty()
	h.SetName(StepDurationMetric)
	h.SetUnit("ms")
	hist := h.SetEmptyHistogram()
	hist.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	hp := hist.DataPoints().AppendEmpty()
	hp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	hp.SetTimestamp(ts)
	ms := float64(step.Duration()) / float64(time.Millisecond)
	hp.SetCount(1)
	hp.SetSum(ms)
	hp.ExplicitBounds().FromRaw([]float64{100, 1000, 10000})
	buckets := []uint64{0, 0, 0, 0}
	switch {
	case ms <= 100:
		buckets[0] = 1
	case ms <= 1000:
		buckets[1] = 1
	case ms <= 10000:
		buckets[2] = 1
	default:
		buckets[3] = 1
	}
	hp.BucketCounts().FromRaw(buckets)
	c := dst.AppendEmpty()
	c.SetName(SkippedItersMetric)
	sum := c.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	cp := sum.DataPoints().AppendEmpty()
	cp.SetStartTimestamp(pcommon.NewTimestampFromTime(r.JobStart()))
	cp.SetTimestamp(ts)
	cp.SetIntValue(0)
}

// AppendLog appends one of rank's log lines about iteration, stamped at the
// step's end.
func (r Run) AppendLog(dst plog.LogRecordSlice, rank Rank, iteration int64, severity plog.SeverityNumber, body string) plog.LogRecord {
	lr := dst.AppendEmpty()
	lr.SetTimestamp(pcommon.NewTimestampFromTime(r.StepStart(iteration).Add(r.StepOf(rank.Rank, iteration).Duration())))
	lr.SetSeverityNumber(severity)
	lr.SetSeverityText(strings.ToUpper(severity.String())) // as Python logging names levels
	lr.Body().SetStr(body)
	lr.Attributes().PutInt(attrkey.MegatronIteration, iteration)
	return lr
}
