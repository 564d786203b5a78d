// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/goldentest"
)

func traceID(s string) pcommon.TraceID {
	var id pcommon.TraceID
	copy(id[:], s)
	return id
}

func spanID(s string) pcommon.SpanID {
	var id pcommon.SpanID
	copy(id[:], s)
	return id
}

// goldenTraces covers every span field and the awkward values: a root span,
// a failing step with events, links and dropped counts, strings that need
// escaping or hold invalid UTF-8, NaN and infinities, and nested values.
func goldenTraces() ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "megatron")
	rs.Resource().Attributes().PutStr("nemo.run.id", "run-1")
	rs.Resource().Attributes().PutStr("nv.dl.rank", "3")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("nemo_lens")
	ss.Scope().SetVersion("0.4.1")

	root := ss.Spans().AppendEmpty()
	root.SetName("megatron.pretrain")
	root.SetTraceID(traceID("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10"))
	root.SetSpanID(spanID("\xa1\xa2\xa3\xa4\xa5\xa6\xa7\xa8"))
	root.SetStartTimestamp(1748779200000000000)
	root.SetEndTimestamp(1748782800123456789)
	root.SetKind(ptrace.SpanKindInternal)

	step := ss.Spans().AppendEmpty()
	step.SetName("megatron.train_step")
	step.SetTraceID(root.TraceID())
	step.SetSpanID(spanID("\xb1\xb2\xb3\xb4\xb5\xb6\xb7\xb8"))
	step.SetParentSpanID(root.SpanID())
	step.SetStartTimestamp(1748779201000000000)
	step.SetEndTimestamp(1748779201850000000)
	step.SetKind(ptrace.SpanKindServer)
	step.Status().SetCode(ptrace.StatusCodeError)
	step.Status().SetMessage("loss is \"NaN\"\n")
	a := step.Attributes()
	a.PutInt("megatron.iteration", 1200)
	a.PutDouble("megatron.loss", math.NaN())
	a.PutDouble("megatron.grad_norm", math.Inf(1))
	a.PutDouble("megatron.min_grad", math.Inf(-1))
	a.PutDouble("megatron.lr", 1.5e-4)
	a.PutDouble("megatron.loss_scale", 65536)
	a.PutDouble("tiny", 1e-9)
	a.PutDouble("huge", 1e300)
	a.PutInt("int64.max", math.MaxInt64)
	a.PutInt("int64.min", math.MinInt64)
	a.PutBool("megatron.update_successful", false)
	a.PutStr("invalid.utf8", "ok\xffbad\xc3(end")
	a.PutStr("escapes", "tab\tquote\"backslash\\ctl\x01\x1fdel\x7f</script>\u2028日本")
	a.PutEmptyBytes("bytes").FromRaw([]byte{0, 1, 2, 0xfe, 0xff})
	a.PutEmpty("empty")
	sl := a.PutEmptySlice("slice")
	sl.AppendEmpty().SetInt(1)
	sl.AppendEmpty().SetStr("two")
	sl.AppendEmpty().SetDouble(3)
	m := a.PutEmptyMap("map")
	m.PutStr("k", "v")
	m.PutEmptyMap("nested").PutBool("deep", true)
	a.PutStr("bad\xffkey", "value")
	step.SetDroppedAttributesCount(2)
	ev := step.Events().AppendEmpty()
	ev.SetName("exception")
	ev.SetTimestamp(1748779201800000000)
	ev.Attributes().PutStr("exception.message", "CUDA out of memory")
	ev.SetDroppedAttributesCount(1)
	step.SetDroppedEventsCount(3)
	link := step.Links().AppendEmpty()
	link.SetTraceID(traceID("\xff\xee\xdd\xcc\xbb\xaa\x99\x88\x77\x66\x55\x44\x33\x22\x11\x00"))
	link.SetSpanID(spanID("\x01\x23\x45\x67\x89\xab\xcd\xef"))
	link.Attributes().PutStr("link.kind", "pp.recv_forward")
	step.SetDroppedLinksCount(4)

	client := ss.Spans().AppendEmpty()
	client.SetName("megatron.save_checkpoint")
	client.SetTraceID(root.TraceID())
	client.SetSpanID(spanID("\xc1\xc2\xc3\xc4\xc5\xc6\xc7\xc8"))
	client.SetParentSpanID(root.SpanID())
	client.SetKind(ptrace.SpanKindClient)
	client.Status().SetCode(ptrace.StatusCodeOk)
	client.SetStartTimestamp(1748779300000000000)
	client.SetEndTimestamp(1748779310000000000)

	other := rs.ScopeSpans().AppendEmpty()
	for _, k := range []ptrace.SpanKind{ptrace.SpanKindProducer, ptrace.SpanKindConsumer, ptrace.SpanKindUnspecified} {
		s := other.Spans().AppendEmpty()
		s.SetName("kind")
		s.SetKind(k)
	}
	return td
}

func goldenMetrics() pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("nemo.run.id", "run-1")
	rm.Resource().Attributes().PutInt("nv.dl.rank", 0)
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("nemo_lens")

	g := sm.Metrics().AppendEmpty()
	g.SetName("megatron.training.loss")
	g.SetUnit("1")
	dp := g.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(1748779201000000000)
	dp.SetDoubleValue(2.5)
	dp.Attributes().PutInt("megatron.iteration", 100)
	dp = g.Gauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(1748779202000000000)
	dp.SetDoubleValue(math.NaN())
	dp.SetFlags(pmetric.DefaultDataPointFlags.WithNoRecordedValue(true))
	dp = g.Gauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(1748779203000000000)
	dp.SetIntValue(3)

	s := sm.Metrics().AppendEmpty()
	s.SetName("megatron.training.skipped_iters")
	s.SetUnit("{iterations}")
	sum := s.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	sdp := sum.DataPoints().AppendEmpty()
	sdp.SetStartTimestamp(1748779200000000000)
	sdp.SetTimestamp(1748779201000000000)
	sdp.SetIntValue(2)

	h := sm.Metrics().AppendEmpty()
	h.SetName("megatron.training.step_duration_ms")
	h.SetUnit("ms")
	hist := h.SetEmptyHistogram()
	hist.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	hdp := hist.DataPoints().AppendEmpty()
	hdp.SetStartTimestamp(1748779200000000000)
	hdp.SetTimestamp(1748779210000000000)
	hdp.SetCount(10)
	hdp.SetSum(8500.5)
	hdp.SetMin(801)
	hdp.SetMax(math.Inf(1))
	hdp.BucketCounts().FromRaw([]uint64{0, 1, 9})
	hdp.ExplicitBounds().FromRaw([]float64{500, 1000})
	hdp2 := hist.DataPoints().AppendEmpty()
	hdp2.SetCount(0)

	e := sm.Metrics().AppendEmpty()
	e.SetName("rl.reward")
	ehist := e.SetEmptyExponentialHistogram()
	ehist.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	edp := ehist.DataPoints().AppendEmpty()
	edp.SetTimestamp(1748779210000000000)
	edp.SetCount(7)
	edp.SetSum(-1.25)
	edp.SetScale(3)
	edp.SetZeroCount(1)
	edp.SetZeroThreshold(1e-9)
	edp.Positive().SetOffset(-2)
	edp.Positive().BucketCounts().FromRaw([]uint64{1, 2, 3})
	edp.Negative().BucketCounts().FromRaw([]uint64{})

	q := sm.Metrics().AppendEmpty()
	q.SetName("megatron.data.load_ms")
	q.SetUnit("ms")
	qdp := q.SetEmptySummary().DataPoints().AppendEmpty()
	qdp.SetTimestamp(1748779210000000000)
	qdp.SetCount(4)
	qdp.SetSum(42)
	qv := qdp.QuantileValues().AppendEmpty()
	qv.SetQuantile(0.5)
	qv.SetValue(9.5)
	qv = qdp.QuantileValues().AppendEmpty()
	qv.SetQuantile(1)
	qv.SetValue(math.Inf(1))

	// A metric without a type has no data point and writes no line.
	sm.Metrics().AppendEmpty().SetName("untyped")
	return md
}

func goldenLogs() plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("nemo.run.id", "run-1")
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName("megatron.training")
	sl.Scope().SetVersion("1.0")

	lr := sl.LogRecords().AppendEmpty()
	lr.SetTimestamp(1748779201000000000)
	lr.SetObservedTimestamp(1748779201000001000)
	lr.SetSeverityNumber(plog.SeverityNumberInfo)
	lr.SetSeverityText("INFO")
	lr.Body().SetStr("iteration 100 | lm loss: 2.5 |\n")
	lr.Attributes().PutInt("megatron.iteration", 100)
	lr.SetTraceID(traceID("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10"))
	lr.SetSpanID(spanID("\xb1\xb2\xb3\xb4\xb5\xb6\xb7\xb8"))

	lr = sl.LogRecords().AppendEmpty()
	lr.SetObservedTimestamp(1748779202000000000)
	lr.SetSeverityNumber(plog.SeverityNumberError)
	lr.SetEventName("megatron.nan_detected")
	lr.SetDroppedAttributesCount(5)
	body := lr.Body().SetEmptyMap()
	body.PutDouble("loss", math.NaN())
	body.PutStr("raw", "\xfe\xff")

	// A record without a body.
	sl.LogRecords().AppendEmpty().SetSeverityText("DEBUG")
	return ld
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *goldentest.Update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644)) //nolint:gosec // G306: a golden file is checked-in testdata, as readable as the rest of the source tree
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "rerun with -update to accept a deliberate format change")
}

func TestSpanRecordsGolden(t *testing.T) {
	out := encodeTraces(goldenTraces())
	checkGolden(t, "spans.jsonl", out)

	lines := splitLines(t, out)
	require.Len(t, lines, 6)
	recs := decodeLines[spanRecord](t, lines)
	// The keys the NeMo Lens span exporter wrote, and the additions.
	base := []string{
		"attributes", "end_time_unix_nano", "events", "kind", "links", "name", "parent_id",
		"resource", "scope", "span_id", "start_time_unix_nano", "status", "status_message", "trace_id",
	}
	assert.Equal(t, base, keysOf(t, lines[0]))
	withDropped := append(slices.Clone(base), "dropped_attributes_count", "dropped_events_count", "dropped_links_count")
	slices.Sort(withDropped)
	assert.Equal(t, withDropped, keysOf(t, lines[1]), "dropped_* present when non-zero")

	root, step := recs[0], recs[1]
	assert.Nil(t, root.ParentID)
	assert.Equal(t, "0102030405060708090a0b0c0d0e0f10", root.TraceID)
	assert.Equal(t, "a1a2a3a4a5a6a7a8", root.SpanID)
	assert.Equal(t, "StatusCode.UNSET", root.Status)
	assert.Equal(t, "SpanKind.INTERNAL", root.Kind)
	assert.Equal(t, json.Number("1748782800123456789"), root.EndTimeUnixNano)
	require.NotNil(t, step.ParentID)
	assert.Equal(t, "a1a2a3a4a5a6a7a8", *step.ParentID)
	assert.Equal(t, "StatusCode.ERROR", step.Status)
	assert.Equal(t, "StatusCode.OK", recs[2].Status)
	assert.Equal(t, "loss is \"NaN\"\n", step.StatusMessage)
	assert.Equal(t, "NaN", step.Attributes["megatron.loss"])
	assert.Equal(t, "Infinity", step.Attributes["megatron.grad_norm"])
	assert.Equal(t, "-Infinity", step.Attributes["megatron.min_grad"])
	assert.Equal(t, json.Number("9223372036854775807"), step.Attributes["int64.max"])
	assert.Equal(t, json.Number("65536.0"), step.Attributes["megatron.loss_scale"], "doubles keep a fraction")
	assert.Equal(t, "ok\uFFFDbad\uFFFD(end", step.Attributes["invalid.utf8"])
	assert.Equal(t, "value", step.Attributes["bad\uFFFDkey"])
	assert.Equal(t, base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 0xfe, 0xff}), step.Attributes["bytes"])
	assert.Nil(t, step.Attributes["empty"])
	assert.Equal(t, []any{json.Number("1"), "two", json.Number("3.0")}, step.Attributes["slice"])
	assert.Equal(t, map[string]any{"k": "v", "nested": map[string]any{"deep": true}}, step.Attributes["map"])
	assert.Equal(t, uint32(2), step.DroppedAttributesCount)
	assert.Equal(t, uint32(3), step.DroppedEventsCount)
	assert.Equal(t, uint32(4), step.DroppedLinksCount)
	require.Len(t, step.Events, 1)
	assert.Equal(t, uint32(1), step.Events[0].DroppedAttributesCount)
	require.Len(t, step.Links, 1)
	assert.Equal(t, "ffeeddccbbaa99887766554433221100", step.Links[0].TraceID)
	assert.Equal(t, map[string]any{"service.name": "megatron", "nemo.run.id": "run-1", "nv.dl.rank": "3"}, step.Resource)
	assert.Equal(t, scopeRecord{Name: "nemo_lens", Version: "0.4.1"}, step.Scope)
	assert.Equal(t, []string{"SpanKind.PRODUCER", "SpanKind.CONSUMER", "SpanKind.UNSPECIFIED"},
		[]string{recs[3].Kind, recs[4].Kind, recs[5].Kind})
	assert.Equal(t, scopeRecord{}, recs[3].Scope)
}

func TestMetricRecordsGolden(t *testing.T) {
	out := encodeMetrics(goldenMetrics())
	checkGolden(t, "metrics.jsonl", out)

	lines := splitLines(t, out)
	require.Len(t, lines, 8)
	recs := decodeLines[metricRecord](t, lines)
	assert.Equal(t, "gauge", recs[0].Type)
	assert.Equal(t, json.Number("2.5"), recs[0].Value)
	assert.Equal(t, "NaN", recs[1].Value)
	assert.True(t, recs[1].NoRecordedValue)
	assert.Equal(t, json.Number("3"), recs[2].Value)

	assert.Equal(t, "sum", recs[3].Type)
	assert.Equal(t, "cumulative", recs[3].Temporality)
	require.NotNil(t, recs[3].Monotonic)
	assert.True(t, *recs[3].Monotonic)

	h := recs[4]
	assert.Equal(t, "histogram", h.Type)
	assert.Equal(t, "delta", h.Temporality)
	assert.Equal(t, uint64(10), *h.Count)
	assert.Equal(t, json.Number("8500.5"), h.Sum)
	assert.Equal(t, json.Number("801.0"), h.Min)
	assert.Equal(t, "Infinity", h.Max)
	assert.Equal(t, []uint64{0, 1, 9}, h.BucketCounts)
	assert.Equal(t, []any{json.Number("500.0"), json.Number("1000.0")}, h.ExplicitBounds)
	assert.NotContains(t, keysOf(t, lines[5]), "sum", "absent optional values are left out")
	assert.Equal(t, []uint64{}, recs[5].BucketCounts)

	e := recs[6]
	assert.Equal(t, "exponential_histogram", e.Type)
	assert.Equal(t, int32(3), *e.Scale)
	assert.Equal(t, &bucketsRecord{Offset: -2, BucketCounts: []uint64{1, 2, 3}}, e.Positive)
	assert.Equal(t, &bucketsRecord{BucketCounts: []uint64{}}, e.Negative)
	assert.Equal(t, json.Number("1e-9"), e.ZeroThreshold)

	s := recs[7]
	assert.Equal(t, "summary", s.Type)
	assert.Equal(t, []quantileRecord{
		{Quantile: json.Number("0.5"), Value: json.Number("9.5")},
		{Quantile: json.Number("1.0"), Value: "Infinity"},
	}, s.Quantiles)
	for _, r := range recs {
		assert.Equal(t, map[string]any{"nemo.run.id": "run-1", "nv.dl.rank": json.Number("0")}, r.Resource)
	}
}

func TestLogRecordsGolden(t *testing.T) {
	out := encodeLogs(goldenLogs())
	checkGolden(t, "logs.jsonl", out)

	lines := splitLines(t, out)
	require.Len(t, lines, 3)
	recs := decodeLines[logRecord](t, lines)
	assert.Equal(t, "iteration 100 | lm loss: 2.5 |\n", recs[0].Body)
	require.NotNil(t, recs[0].TraceID)
	assert.Equal(t, "0102030405060708090a0b0c0d0e0f10", *recs[0].TraceID)
	assert.Equal(t, "b1b2b3b4b5b6b7b8", *recs[0].SpanID)
	assert.Equal(t, int32(9), recs[0].SeverityNumber)
	assert.Nil(t, recs[1].TraceID)
	assert.Nil(t, recs[1].SpanID)
	assert.Equal(t, "megatron.nan_detected", recs[1].EventName)
	assert.Equal(t, uint32(5), recs[1].DroppedAttributesCount)
	assert.Equal(t, map[string]any{"loss": "NaN", "raw": "\uFFFD\uFFFD"}, recs[1].Body)
	assert.Nil(t, recs[2].Body)
	assert.Equal(t, []string{
		"attributes", "body", "observed_time_unix_nano", "resource", "scope",
		"severity_number", "severity_text", "span_id", "time_unix_nano", "trace_id",
	}, keysOf(t, lines[2]))
}
