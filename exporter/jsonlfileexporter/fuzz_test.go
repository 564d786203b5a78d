// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter

import (
	"bytes"
	"encoding/json"
	"path"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// checkLines fails unless out is n complete lines, each one JSON object.
func checkLines(t *testing.T, out []byte, n int) {
	t.Helper()
	if n == 0 {
		if len(out) != 0 {
			t.Fatalf("no records, but output %q", out)
		}
		return
	}
	if !bytes.HasSuffix(out, []byte("\n")) {
		t.Fatalf("output does not end in a newline")
	}
	lines := bytes.Split(out[:len(out)-1], []byte("\n"))
	if len(lines) != n {
		t.Fatalf("%d records gave %d lines", n, len(lines))
	}
	for _, line := range lines {
		var v map[string]any
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatalf("line is not a JSON object: %v\n%q", err, line)
		}
	}
}

// FuzzEncodeOTLP feeds arbitrary OTLP protobuf requests (traces, metrics or
// logs, by the first byte) through the encoder: whatever decodes must encode
// as exactly one valid JSON line per span, data point or log record.
func FuzzEncodeOTLP(f *testing.F) {
	td, md, ld := megatronTraces(2, 3), megatronMetrics(2, 3), megatronLogs(2, 3)
	tb, _ := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	mb, _ := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	lb, _ := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	f.Add(byte(0), tb)
	f.Add(byte(1), mb)
	f.Add(byte(2), lb)
	f.Fuzz(func(t *testing.T, signal byte, body []byte) {
		switch signal % 3 {
		case 0:
			req := ptraceotlp.NewExportRequest()
			if req.UnmarshalProto(body) != nil {
				return
			}
			checkLines(t, encodeTraces(req.Traces()), req.Traces().SpanCount())
		case 1:
			req := pmetricotlp.NewExportRequest()
			if req.UnmarshalProto(body) != nil {
				return
			}
			checkLines(t, encodeMetrics(req.Metrics()), req.Metrics().DataPointCount())
		default:
			req := plogotlp.NewExportRequest()
			if req.UnmarshalProto(body) != nil {
				return
			}
			checkLines(t, encodeLogs(req.Logs()), req.Logs().LogRecordCount())
		}
	})
}

// FuzzPathTemplateValue: whatever a sender puts in an attribute used by a
// path template (a run id like "../../etc"), the rendered path stays a clean
// relative path inside the output directory, without control characters.
func FuzzPathTemplateValue(f *testing.F) {
	for _, s := range []string{"run-1", "../../etc", "..", ".", "/abs", "a/b", "a\\b", "\x00\n", "\xff\xfe", strings.Repeat("x", 300), "ünïcødé"} {
		f.Add(s)
	}
	tmpl, err := parsePathTemplate("{nemo.run.id}/traces.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, runID string) {
		attrs := pcommon.NewMap()
		attrs.PutStr("nemo.run.id", runID)
		p := string(tmpl.render(nil, attrs, "no-run-id"))
		if p != path.Clean(p) || path.IsAbs(p) || p == ".." || strings.HasPrefix(p, "../") || strings.Contains(p, "/../") {
			t.Fatalf("run id %q rendered as %q, which is not a clean path inside the directory", runID, p)
		}
		if strings.Count(p, "/") != 1 || !strings.HasSuffix(p, "/traces.jsonl") || strings.HasPrefix(p, ".") {
			t.Fatalf("run id %q rendered as %q: the value must stay one path element", runID, p)
		}
		if strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }) {
			t.Fatalf("run id %q rendered as %q, with control characters or a backslash", runID, p)
		}
	})
}
