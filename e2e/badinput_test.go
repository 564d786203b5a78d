// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

func post(tb testing.TB, url, contentType, encoding string, body []byte) (int, string) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b)
}

// hostileTraces is valid OTLP whose content is everything a JSON writer can
// trip on: invalid UTF-8, NaN and infinities, a map nested 200 deep, a 1 MiB
// string, a non-integer rank.
func hostileTraces() ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("nemo.run.id", "../../etc")
	rs.Resource().Attributes().PutStr("nv.dl.rank", "three")
	rs.Resource().Attributes().PutStr("service.name", "hostile\xff\xfe")
	span := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetName("bad\x00name\xc3\x28")
	span.SetTraceID(pcommon.TraceID{1, 2, 3})
	span.SetSpanID(pcommon.SpanID{4, 5, 6})
	a := span.Attributes()
	a.PutDouble("nan", math.NaN())
	a.PutDouble("inf", math.Inf(1))
	a.PutDouble("-inf", math.Inf(-1))
	a.PutStr("huge", strings.Repeat("x", 1<<20))
	a.PutStr("utf8", "\xed\xa0\x80 surrogate \xf4\x90\x80\x80 too big \"quote\" \\ \u2028")
	m := a.PutEmptyMap("nested")
	for i := range 200 {
		m = m.PutEmptyMap(fmt.Sprintf("level%d", i))
	}
	m.PutStr("bottom", "deep")
	return td
}

func hostileMetrics() pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("nemo.run.id", "run-hostile")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("megatron.training.loss")
	g := m.SetEmptyGauge()
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.MaxFloat64, math.SmallestNonzeroFloat64} {
		g.DataPoints().AppendEmpty().SetDoubleValue(v)
	}
	return md
}

// TestBadInputIsRefusedOrSanitised sends the OTLP receivers malformed,
// mislabelled, oversized and compressed-bomb requests (each refused with a
// 4xx), and valid requests full of hostile values (accepted and written as
// strict JSON). The collector stays healthy throughout, and every line it
// writes parses.
func TestBadInputIsRefusedOrSanitised(t *testing.T) {
	env := testEnv(t)
	c := testcollector.Start(t, testcollector.Config(t, "file.yaml"), testcollector.Options{Env: env})
	base := "http://" + c.HTTPEndpoint()

	var bomb bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&bomb, gzip.BestCompression)
	zeros := make([]byte, 1<<20)
	for range 256 { // 256 MiB of zeros, about 256 KiB compressed
		_, _ = gz.Write(zeros)
	}
	_ = gz.Close()

	wrongLengthID := append([]byte{0x0a, 0x0a, 0x12, 0x08, 0x12, 0x06, 0x0a, 0x04}, []byte("abcd")...) // span with a 4-byte trace_id
	refusals := []struct {
		name, path, contentType, encoding string
		body                              []byte
	}{
		{"malformed protobuf", "/v1/traces", "application/x-protobuf", "", []byte{0xff, 0xff, 0xff, 0x0f, 0x01}},
		{"malformed json", "/v1/traces", "application/json", "", []byte(`{"resourceSpans": [`)},
		{"wrong content type", "/v1/traces", "text/plain", "", []byte("hello")},
		{"trace id of the wrong length", "/v1/traces", "application/x-protobuf", "", wrongLengthID},
		{"unknown content encoding", "/v1/metrics", "application/x-protobuf", "br2", []byte{1, 2, 3}},
		{"oversized body", "/v1/logs", "application/x-protobuf", "", make([]byte, 64<<20)},
		{"compression bomb", "/v1/traces", "application/x-protobuf", "gzip", bomb.Bytes()},
	}
	for _, r := range refusals {
		status, msg := post(t, base+r.path, r.contentType, r.encoding, r.body)
		if status < 400 || status >= 500 {
			t.Errorf("%s: status %d (%s), want a 4xx refusal", r.name, status, msg)
		} else {
			t.Logf("%s: refused with %d", r.name, status)
		}
		if code := httpStatus(t, fmt.Sprintf("http://127.0.0.1:%d/", c.HealthPort)); code != http.StatusOK {
			t.Fatalf("after %s the collector is unhealthy (%d):\n%s", r.name, code, c.Logs())
		}
	}

	tb, _ := ptraceotlp.NewExportRequestFromTraces(hostileTraces()).MarshalProto()
	if status, msg := post(t, base+"/v1/traces", "application/x-protobuf", "", tb); status != http.StatusOK {
		t.Errorf("hostile but valid traces: status %d (%s), want 200", status, msg)
	}
	mb, _ := pmetricotlp.NewExportRequestFromMetrics(hostileMetrics()).MarshalProto()
	if status, msg := post(t, base+"/v1/metrics", "application/x-protobuf", "", mb); status != http.StatusOK {
		t.Errorf("hostile but valid metrics: status %d (%s), want 200", status, msg)
	}
	sent := runJob(t, mixedJob(c, "run-after-bad-input", 2, 1))
	c.Stop()

	got := readTelemetry(t, env["NEMO_TELEMETRY_DIR"]) // every line strict JSON, jq agrees
	if got.ByRun["run-after-bad-input"] != sent {
		t.Errorf("after the bad input: acknowledged %s, found %s", describe(sent), describe(got.ByRun["run-after-bad-input"]))
	}
	if got.Spans != sent.Spans+1 || got.DataPoints != sent.DataPoints+6 {
		t.Errorf("the hostile span and 6 hostile points should be written once each: found %s", describe(got.Result))
	}
	for file := range got.ByFile {
		for elem := range strings.SplitSeq(file, "/") {
			if elem == ".." || elem == "" {
				t.Errorf("output file %q escapes the output directory", file)
			}
		}
	}
	if got.ByFile["_._.._etc/traces.jsonl"].Spans != 1 {
		t.Errorf("the run id ../../etc should be sanitized to the directory _._.._etc: %v", got.ByFile)
	}
}
