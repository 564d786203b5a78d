// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package weaveexporter

import (
	"compress/gzip"
	"compress/zlib"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nemo-lens/otelcol-nemo/exporter/weaveexporter/internal/metadatatest"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lettertest"
)

const testAPIKey = "k3y-0123456789abcdef-secret"

// weaveRequest is one request the fake Weave server received, decoded.
type weaveRequest struct {
	traces    ptrace.Traces
	spans     []string // span names, in order
	project   string   // "<entity>/<project>" from the resource attributes
	header    string   // project_id header
	bodyBytes int      // uncompressed protobuf size
	encoding  string   // Content-Encoding
	status    int      // what the fake answered
}

// weaveReply is what the fake answers.
type weaveReply struct {
	status      int
	contentType string
	retryAfter  string
	body        []byte
}

// fakeWeave is an httptest stand-in for Weave's OTLP endpoint: it decodes
// real OTLP protobuf (gzip or deflate), checks the API key the way the
// exporter's auth_mode sends it, checks that a request holds exactly one
// entity/project, and answers what the test's reply function says.
type fakeWeave struct {
	t      *testing.T
	srv    *httptest.Server
	apiKey string
	mode   AuthMode
	reply  func(n int, req weaveRequest) weaveReply // n counts requests from 0

	letters string // the dead-letter directory of testConfig

	mu       sync.Mutex
	requests []weaveRequest
}

func newFakeWeave(t *testing.T, mode AuthMode, reply func(n int, req weaveRequest) weaveReply) *fakeWeave {
	f := &fakeWeave{t: t, apiKey: testAPIKey, mode: mode, reply: reply, letters: t.TempDir()}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeWeave) url() string { return f.srv.URL + "/otel/v1/traces" }

func (f *fakeWeave) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/otel/v1/traces" {
		f.t.Errorf("fake weave: unexpected %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		f.t.Errorf("fake weave: Content-Type %q, want application/x-protobuf", ct)
		w.WriteHeader(http.StatusUnsupportedMediaType)
		return
	}
	if !f.authorized(r) {
		writeReply(w, weaveReply{status: http.StatusUnauthorized, contentType: "application/json", body: []byte(`{"detail":"Invalid or missing API key"}`)})
		return
	}
	var body io.Reader = r.Body
	encoding := r.Header.Get("Content-Encoding")
	switch encoding {
	case "gzip":
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			f.t.Errorf("fake weave: gzip: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		body = gz
	case "deflate":
		zr, err := zlib.NewReader(r.Body)
		if err != nil {
			f.t.Errorf("fake weave: deflate: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		body = zr
	case "":
	default:
		f.t.Errorf("fake weave: Content-Encoding %q is not accepted by Weave", encoding)
		w.WriteHeader(http.StatusUnsupportedMediaType)
		return
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		f.t.Errorf("fake weave: read body: %v", err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	otlp := ptraceotlp.NewExportRequest()
	if err := otlp.UnmarshalProto(raw); err != nil {
		f.t.Errorf("fake weave: body is not an OTLP ExportTraceServiceRequest: %v", err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	req := weaveRequest{
		traces:    otlp.Traces(),
		header:    r.Header.Get("project_id"),
		bodyBytes: len(raw),
		encoding:  encoding,
	}
	projects := map[string]bool{}
	rss := req.traces.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		attrs := rss.At(i).Resource().Attributes()
		entity, _ := attrString(attrs.Get("wandb.entity"))
		project, _ := attrString(attrs.Get("wandb.project"))
		if entity == "" || project == "" {
			f.t.Errorf("fake weave: resource without wandb.entity/wandb.project: %v", attrs.AsRaw())
		}
		projects[entity+"/"+project] = true
		forEachSpan(rss.At(i), func(s ptrace.Span) { req.spans = append(req.spans, s.Name()) })
	}
	if len(projects) != 1 {
		f.t.Errorf("fake weave: request holds %d projects, want 1: %v", len(projects), projects)
	}
	for p := range projects {
		req.project = p
	}
	if req.header != req.project {
		f.t.Errorf("fake weave: project_id header %q, resources say %q", req.header, req.project)
	}

	f.mu.Lock()
	n := len(f.requests)
	f.mu.Unlock()
	reply := weaveReply{status: http.StatusOK}
	if f.reply != nil {
		reply = f.reply(n, req)
	}
	req.status = reply.status
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	writeReply(w, reply)
}

func (f *fakeWeave) authorized(r *http.Request) bool {
	switch f.mode {
	case AuthModeBasic:
		user, pass, ok := r.BasicAuth()
		return ok && user == "api" && pass == f.apiKey && r.Header.Get("wandb-api-key") == ""
	default:
		return r.Header.Get("wandb-api-key") == f.apiKey && r.Header.Get("Authorization") == ""
	}
}

func writeReply(w http.ResponseWriter, reply weaveReply) {
	if reply.contentType != "" {
		w.Header().Set("Content-Type", reply.contentType)
	}
	if reply.retryAfter != "" {
		w.Header().Set("Retry-After", reply.retryAfter)
	}
	w.WriteHeader(reply.status)
	_, _ = w.Write(reply.body)
}

func (f *fakeWeave) received() []weaveRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

// accepted returns the names of the spans in requests answered 2xx, sorted.
// A span delivered twice appears twice.
func (f *fakeWeave) accepted() []string {
	var names []string
	for _, r := range f.received() {
		if r.status >= 200 && r.status < 300 {
			names = append(names, r.spans...)
		}
	}
	slices.Sort(names)
	return names
}

func forEachSpan(rs ptrace.ResourceSpans, fn func(ptrace.Span)) {
	for j := 0; j < rs.ScopeSpans().Len(); j++ {
		spans := rs.ScopeSpans().At(j).Spans()
		for k := 0; k < spans.Len(); k++ {
			fn(spans.At(k))
		}
	}
}

func partialSuccessBody(t *testing.T, rejected int64, msg string) []byte {
	resp := ptraceotlp.NewExportResponse()
	resp.PartialSuccess().SetRejectedSpans(rejected)
	resp.PartialSuccess().SetErrorMessage(msg)
	b, err := resp.MarshalProto()
	require.NoError(t, err)
	return b
}

// traceBuilder makes batches whose span names say where they come from.
type traceBuilder struct {
	td   ptrace.Traces
	next uint64
}

func newTraceBuilder() *traceBuilder { return &traceBuilder{td: ptrace.NewTraces()} }

// resource adds a resource with attrs and one scope holding spans named
// <prefix>-0 ... <prefix>-(n-1).
func (b *traceBuilder) resource(attrs map[string]any, prefix string, n int) ptrace.ResourceSpans {
	rs := b.td.ResourceSpans().AppendEmpty()
	if err := rs.Resource().Attributes().FromRaw(attrs); err != nil {
		panic(err)
	}
	rs.SetSchemaUrl("https://opentelemetry.io/schemas/1.26.0")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("nemo_lens")
	ss.Scope().SetVersion("1.2.3")
	for i := range n {
		b.span(ss, fmt.Sprintf("%s-%d", prefix, i))
	}
	return rs
}

func (b *traceBuilder) span(ss ptrace.ScopeSpans, name string) ptrace.Span {
	b.next++
	s := ss.Spans().AppendEmpty()
	s.SetName(name)
	var tid [16]byte
	var sid [8]byte
	tid[0], tid[15] = 0xab, byte(b.next)
	sid[0], sid[6], sid[7] = 0xcd, byte(b.next>>8), byte(b.next)
	s.SetTraceID(pcommon.TraceID(tid))
	s.SetSpanID(pcommon.SpanID(sid))
	start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(b.next) * time.Millisecond)
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	s.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(40 * time.Millisecond)))
	s.Attributes().PutInt("megatron.iteration", int64(b.next))
	s.Attributes().PutDouble("megatron.loss", 2.25)
	return s
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

func sorted(groups ...[]string) []string {
	var out []string
	for _, g := range groups {
		out = append(out, g...)
	}
	slices.Sort(out)
	return out
}

// deadLetters reads what the exporter dead-lettered for spans of no run
// (the test resources carry no nemo.run.id): the lines and their spans.
func (f *fakeWeave) deadLetters(t *testing.T) ([]ptrace.Traces, int) {
	return lettertest.Traces(t, f.letters, "unknown", "weave")
}

// letterSpans are the names of the spans in lines.
func letterSpans(lines []ptrace.Traces) []string {
	var out []string
	for _, td := range lines {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			forEachSpan(td.ResourceSpans().At(i), func(s ptrace.Span) { out = append(out, s.Name()) })
		}
	}
	slices.Sort(out)
	return out
}

// testConfig is a config sending to f, without queue (so ConsumeTraces
// returns the final outcome) and with fast retries.
func testConfig(f *fakeWeave) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.ClientConfig.Endpoint = f.url()
	cfg.APIKey = testAPIKey
	cfg.AuthMode = f.mode
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	cfg.DeadLetter.Directory = f.letters
	cfg.RetryConfig = configretry.BackOffConfig{
		Enabled:         true,
		InitialInterval: 5 * time.Millisecond,
		MaxInterval:     20 * time.Millisecond,
		Multiplier:      2,
		MaxElapsedTime:  10 * time.Second,
	}
	return cfg
}

type harness struct {
	logs *observer.ObservedLogs
	tel  *componenttest.Telemetry
	set  exporter.Settings
}

func newHarness(t *testing.T) *harness {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) }) //nolint:usetesting // t.Context() is already canceled when Cleanup functions run
	set := metadatatest.NewSettings(tel)
	core, logs := observer.New(zapcore.DebugLevel)
	set.Logger = zap.New(core)
	return &harness{logs: logs, tel: tel, set: set}
}

// startTraces creates the exporter through the factory, as the collector does.
func (h *harness) startTraces(t *testing.T, cfg *Config) exporter.Traces {
	exp, err := NewFactory().CreateTraces(t.Context(), h.set, cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(t.Context(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, exp.Shutdown(context.Background())) }) //nolint:usetesting // t.Context() is already canceled when Cleanup functions run
	return exp
}

// startExporter creates the bare exporter, for tests that drive pushTraces
// and the clock directly.
func (h *harness) startExporter(t *testing.T, cfg *Config) *weaveExporter {
	e, err := newWeaveExporter(cfg, h.set)
	require.NoError(t, err)
	require.NoError(t, e.start(t.Context(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, e.shutdown(context.Background())) }) //nolint:usetesting // t.Context() is already canceled when Cleanup functions run
	return e
}

// counter sums the data points of an internal counter whose attributes
// include attrs (0 when it was never recorded).
func (h *harness) counter(t *testing.T, name string, attrs ...attribute.KeyValue) int64 {
	m, err := h.tel.GetMetric(name)
	if err != nil {
		return 0
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is not an int64 sum", name)
	var total int64
	for _, dp := range sum.DataPoints {
		match := true
		for _, a := range attrs {
			if v, ok := dp.Attributes.Value(a.Key); !ok || v != a.Value {
				match = false
			}
		}
		if match {
			total += dp.Value
		}
	}
	return total
}

// logged returns the messages logged at level or above.
func (h *harness) logged(level zapcore.Level) []observer.LoggedEntry {
	var out []observer.LoggedEntry
	all := h.logs.All()
	for i := range all {
		if all[i].Level >= level {
			out = append(out, all[i])
		}
	}
	return out
}
