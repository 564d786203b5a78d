// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter

import (
	"bytes"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// compileSchema compiles one of the shipped schemas; compiling also checks
// the schema against the JSON Schema 2020-12 meta-schema.
func compileSchema(tb testing.TB, name string) *jsonschema.Schema {
	tb.Helper()
	sch, err := jsonschema.NewCompiler().Compile(filepath.Join("schema", name))
	require.NoError(tb, err)
	return sch
}

func validateLines(tb testing.TB, sch *jsonschema.Schema, out []byte) {
	tb.Helper()
	for _, line := range splitLines(tb, out) {
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
		require.NoError(tb, err)
		require.NoError(tb, sch.Validate(inst), "line: %s", line)
	}
}

func TestSpanRecordsMatchSchema(t *testing.T) {
	sch := compileSchema(t, "span.schema.json")
	validateLines(t, sch, encodeTraces(goldenTraces()))
	validateLines(t, sch, encodeTraces(megatronTraces(2, 50)))
	validateLines(t, sch, encodeTraces(randomTraces(rand.New(rand.NewPCG(5, 6)), 200)))
}

func TestMetricRecordsMatchSchema(t *testing.T) {
	sch := compileSchema(t, "metric.schema.json")
	validateLines(t, sch, encodeMetrics(goldenMetrics()))
	validateLines(t, sch, encodeMetrics(megatronMetrics(2, 50)))
}

func TestLogRecordsMatchSchema(t *testing.T) {
	sch := compileSchema(t, "log.schema.json")
	validateLines(t, sch, encodeLogs(goldenLogs()))
	validateLines(t, sch, encodeLogs(megatronLogs(2, 50)))
}

// TestSchemasRejectMalformedRecords shows the schemas are strict enough to
// catch the mistakes they exist for.
func TestSchemasRejectMalformedRecords(t *testing.T) {
	span := compileSchema(t, "span.schema.json")
	metric := compileSchema(t, "metric.schema.json")
	log := compileSchema(t, "log.schema.json")
	goodSpan := string(splitLines(t, encodeTraces(goldenTraces()))[0])
	goodGauge := string(splitLines(t, encodeMetrics(goldenMetrics()))[0])
	for _, tc := range []struct {
		name   string
		sch    *jsonschema.Schema
		record string
	}{
		{"span without status", span, replaceOnce(goodSpan, `"status":"StatusCode.UNSET",`, ``)},
		{"span with OTLP status", span, replaceOnce(goodSpan, `"StatusCode.UNSET"`, `"STATUS_CODE_UNSET"`)},
		{"span with upper-case id", span, replaceOnce(goodSpan, `"a1a2a3a4a5a6a7a8"`, `"A1A2A3A4A5A6A7A8"`)},
		{"span with empty parent", span, replaceOnce(goodSpan, `"parent_id":null`, `"parent_id":""`)},
		{"span with unknown key", span, replaceOnce(goodSpan, `{"name"`, `{"extra":1,"name"`)},
		{"span with zero dropped count", span, replaceOnce(goodSpan, `"links":[]`, `"links":[],"dropped_links_count":0`)},
		{"span with negative time", span, replaceOnce(goodSpan, `"start_time_unix_nano":1748779200000000000`, `"start_time_unix_nano":-1`)},
		{"gauge with bare NaN-like string", metric, replaceOnce(goodGauge, `"value":2.5`, `"value":"nan"`)},
		{"gauge with histogram keys", metric, replaceOnce(goodGauge, `"value":2.5`, `"value":2.5,"bucket_counts":[]`)},
		{"gauge without value", metric, replaceOnce(goodGauge, `,"value":2.5`, ``)},
		{"unknown metric type", metric, replaceOnce(goodGauge, `"type":"gauge"`, `"type":"counter"`)},
		{"log without body", log, `{"time_unix_nano":0,"observed_time_unix_nano":0,"severity_number":0,"severity_text":"","attributes":{},"trace_id":null,"span_id":null,"resource":{},"scope":{"name":"","version":""}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(tc.record)))
			require.NoError(t, err, tc.record)
			assert.Error(t, tc.sch.Validate(inst), tc.record)
		})
	}
}

func replaceOnce(s, old, repl string) string {
	i := bytes.Index([]byte(s), []byte(old))
	if i < 0 {
		panic("replaceOnce: " + strconv.Quote(old) + " not in record")
	}
	return s[:i] + repl + s[i+len(old):]
}

// randomTraces returns spans with random names, statuses, kinds, events,
// links and attribute values of every type.
func randomTraces(r *rand.Rand, n int) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	randomValue(r, rs.Resource().Attributes().PutEmpty("res"), 2)
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	for i := range n {
		s := spans.AppendEmpty()
		s.SetName(randomString(r))
		var tid [16]byte
		var sid, pid [8]byte
		for j := range tid {
			tid[j] = byte(r.Uint32())
		}
		for j := range sid {
			sid[j] = byte(r.Uint32())
			if r.IntN(2) == 0 {
				pid[j] = byte(r.Uint32())
			}
		}
		s.SetTraceID(tid)
		s.SetSpanID(sid)
		s.SetParentSpanID(pid)
		s.SetKind(ptrace.SpanKind(r.IntN(6)))
		s.Status().SetCode(ptrace.StatusCode(r.IntN(3)))
		s.Status().SetMessage(randomString(r))
		s.SetStartTimestamp(1748779200000000000)
		s.SetEndTimestamp(math.MaxUint64)
		for k := range 4 {
			randomValue(r, s.Attributes().PutEmpty(strconv.Itoa(k)+randomString(r)), 3)
		}
		if i%3 == 0 {
			ev := s.Events().AppendEmpty()
			ev.SetName(randomString(r))
			randomValue(r, ev.Attributes().PutEmpty("e"), 2)
			ev.SetDroppedAttributesCount(uint32(r.IntN(2)))
			l := s.Links().AppendEmpty()
			l.SetTraceID(tid)
			l.SetSpanID(sid)
			s.SetDroppedLinksCount(uint32(r.IntN(2)))
		}
	}
	return td
}

// The data types below have no lines of their own but must not produce
// invalid ones either.
func TestEmptyBatchesWriteNothing(t *testing.T) {
	assert.Empty(t, encodeTraces(ptrace.NewTraces()))
	assert.Empty(t, encodeMetrics(pmetric.NewMetrics()))
	assert.Empty(t, encodeLogs(plog.NewLogs()))
	td := ptrace.NewTraces()
	td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	assert.Empty(t, encodeTraces(td))
}
