// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

type scopeRecord struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

type eventRecord struct {
	Name                   string         `json:"name"`
	TimeUnixNano           json.Number    `json:"time_unix_nano"`
	Attributes             map[string]any `json:"attributes"`
	DroppedAttributesCount uint32         `json:"dropped_attributes_count"`
}

type linkRecord struct {
	TraceID                string         `json:"trace_id"`
	SpanID                 string         `json:"span_id"`
	Attributes             map[string]any `json:"attributes"`
	DroppedAttributesCount uint32         `json:"dropped_attributes_count"`
}

type spanRecord struct {
	Name                   string         `json:"name"`
	TraceID                string         `json:"trace_id"`
	SpanID                 string         `json:"span_id"`
	ParentID               *string        `json:"parent_id"`
	Kind                   string         `json:"kind"`
	StartTimeUnixNano      json.Number    `json:"start_time_unix_nano"`
	EndTimeUnixNano        json.Number    `json:"end_time_unix_nano"`
	Status                 string         `json:"status"`
	StatusMessage          string         `json:"status_message"`
	Attributes             map[string]any `json:"attributes"`
	Events                 []eventRecord  `json:"events"`
	Links                  []linkRecord   `json:"links"`
	DroppedAttributesCount uint32         `json:"dropped_attributes_count"`
	DroppedEventsCount     uint32         `json:"dropped_events_count"`
	DroppedLinksCount      uint32         `json:"dropped_links_count"`
	Resource               map[string]any `json:"resource"`
	Scope                  scopeRecord    `json:"scope"`
}

type bucketsRecord struct {
	Offset       int32    `json:"offset"`
	BucketCounts []uint64 `json:"bucket_counts"`
}

type quantileRecord struct {
	Quantile any `json:"quantile"`
	Value    any `json:"value"`
}

type metricRecord struct {
	Name              string           `json:"name"`
	Unit              string           `json:"unit"`
	Type              string           `json:"type"`
	TimeUnixNano      json.Number      `json:"time_unix_nano"`
	StartTimeUnixNano json.Number      `json:"start_time_unix_nano"`
	Attributes        map[string]any   `json:"attributes"`
	NoRecordedValue   bool             `json:"no_recorded_value"`
	Value             any              `json:"value"`
	Temporality       string           `json:"temporality"`
	Monotonic         *bool            `json:"monotonic"`
	Count             *uint64          `json:"count"`
	Sum               any              `json:"sum"`
	Min               any              `json:"min"`
	Max               any              `json:"max"`
	BucketCounts      []uint64         `json:"bucket_counts"`
	ExplicitBounds    []any            `json:"explicit_bounds"`
	Scale             *int32           `json:"scale"`
	ZeroCount         *uint64          `json:"zero_count"`
	ZeroThreshold     any              `json:"zero_threshold"`
	Positive          *bucketsRecord   `json:"positive"`
	Negative          *bucketsRecord   `json:"negative"`
	Quantiles         []quantileRecord `json:"quantiles"`
	Resource          map[string]any   `json:"resource"`
	Scope             scopeRecord      `json:"scope"`
}

type logRecord struct {
	TimeUnixNano           json.Number    `json:"time_unix_nano"`
	ObservedTimeUnixNano   json.Number    `json:"observed_time_unix_nano"`
	SeverityNumber         int32          `json:"severity_number"`
	SeverityText           string         `json:"severity_text"`
	Body                   any            `json:"body"`
	Attributes             map[string]any `json:"attributes"`
	TraceID                *string        `json:"trace_id"`
	SpanID                 *string        `json:"span_id"`
	EventName              string         `json:"event_name"`
	DroppedAttributesCount uint32         `json:"dropped_attributes_count"`
	Resource               map[string]any `json:"resource"`
	Scope                  scopeRecord    `json:"scope"`
}

// splitLines splits JSONL output into lines, requiring that it is not empty
// and ends with a line end.
func splitLines(tb testing.TB, out []byte) [][]byte {
	tb.Helper()
	require.NotEmpty(tb, out)
	require.Equal(tb, byte('\n'), out[len(out)-1], "output must end with a line end")
	return bytes.Split(out[:len(out)-1], []byte{'\n'})
}

// decodeLines decodes every line into a T with decodeStrict.
func decodeLines[T any](tb testing.TB, lines [][]byte) []T {
	tb.Helper()
	recs := make([]T, len(lines))
	for i, l := range lines {
		decodeStrict(tb, l, &recs[i])
	}
	return recs
}

// decodeStrict decodes one line into v the way a strict reader would: valid
// UTF-8, valid RFC 8259 JSON, one value per line, no unknown key.
func decodeStrict(tb testing.TB, line []byte, v any) {
	tb.Helper()
	require.True(tb, utf8.Valid(line), "line is not valid UTF-8: %q", line)
	require.True(tb, json.Valid(line), "line is not valid JSON: %s", line)
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	require.NoError(tb, dec.Decode(v), "line: %s", line)
	_, err := dec.Token()
	require.ErrorIs(tb, err, io.EOF, "line holds more than one JSON value: %s", line)
}

func keysOf(tb testing.TB, line []byte) []string {
	tb.Helper()
	var m map[string]json.RawMessage
	require.NoError(tb, json.Unmarshal(line, &m))
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func encodeTraces(td ptrace.Traces) []byte {
	var e recordEncoder
	var out []byte
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		out, _ = e.appendResourceSpans(out, td.ResourceSpans().At(i))
	}
	return out
}

func encodeMetrics(md pmetric.Metrics) []byte {
	var e recordEncoder
	var out []byte
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		out, _ = e.appendResourceMetrics(out, md.ResourceMetrics().At(i))
	}
	return out
}

func encodeLogs(ld plog.Logs) []byte {
	var e recordEncoder
	var out []byte
	for i := 0; i < ld.ResourceLogs().Len(); i++ {
		out, _ = e.appendResourceLogs(out, ld.ResourceLogs().At(i))
	}
	return out
}

func TestMegatronBatchesDecodeStrictly(t *testing.T) {
	spans := splitLines(t, encodeTraces(megatronTraces(8, 125)))
	require.Len(t, spans, 1000)
	for _, l := range spans {
		var r spanRecord
		decodeStrict(t, l, &r)
		require.Len(t, r.Attributes, 20)
	}
	points := splitLines(t, encodeMetrics(megatronMetrics(8, 125)))
	require.Len(t, points, 1000)
	for _, l := range points {
		var r metricRecord
		decodeStrict(t, l, &r)
	}
	logs := splitLines(t, encodeLogs(megatronLogs(8, 125)))
	require.Len(t, logs, 1000)
	for _, l := range logs {
		var r logRecord
		decodeStrict(t, l, &r)
	}
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
