package weaveexporter

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap/zapcore"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/nemo-lens/otelcol-nemo/exporter/weaveexporter/internal/metadatatest"
)

const (
	metricDropped  = "otelcol_exporter_weave_spans_dropped"
	metricRejected = "otelcol_exporter_weave_spans_rejected"
	metricRenamed  = "otelcol_exporter_weave_spans_renamed"
	metricLinked   = "otelcol_exporter_weave_spans_run_linked"
	metricTooLarge = "otelcol_exporter_weave_requests_too_large"
)

func project(entity, project string) map[string]any {
	return map[string]any{"wandb.entity": entity, "wandb.project": project, "service.name": "megatron"}
}

// encoded returns td's protobuf encoding, to check that exporting left it alone.
func encoded(t *testing.T, td ptrace.Traces) []byte {
	b, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	require.NoError(t, err)
	return b
}

// readOnly marks td read-only, as the collector does when it hands one
// batch to several consumers: any write to it would panic.
func readOnly(td ptrace.Traces) ptrace.Traces {
	td.MarkReadOnly()
	return td
}

func TestExportSplitsByProjectAndDropsSpansWithoutOne(t *testing.T) {
	f := newFakeWeave(t, AuthModeHeader, nil)
	h := newHarness(t)
	cfg := testConfig(f)
	cfg.Entity = "acme" // no project default: resources must carry wandb.project
	exp := h.startTraces(t, cfg)

	b := newTraceBuilder()
	b.resource(project("acme", "llm"), "a", 3)
	b.resource(project("acme", "rl"), "b", 2)
	b.resource(map[string]any{"wandb.project": "llm", "service.name": "megatron"}, "c", 2)
	b.resource(map[string]any{"service.name": "megatron", "service.instance.id": "run7-rank3"}, "d", 4)
	b.resource(project("other", "llm"), "e", 1)
	b.resource(map[string]any{"wandb.entity": "", "wandb.project": "llm"}, "f", 1)
	td := readOnly(b.td)
	before := encoded(t, td)

	require.NoError(t, exp.ConsumeTraces(context.Background(), td))

	reqs := f.received()
	require.Len(t, reqs, 3)
	got := map[string][]string{}
	for _, r := range reqs {
		got[r.project] = append(got[r.project], r.spans...)
	}
	assert.Equal(t, map[string][]string{
		"acme/llm":  {"a-0", "a-1", "a-2", "c-0", "c-1", "f-0"},
		"acme/rl":   {"b-0", "b-1"},
		"other/llm": {"e-0"},
	}, got)
	assert.Equal(t, sorted(names("a", 3), names("b", 2), names("c", 2), names("e", 1), names("f", 1)), f.accepted())

	// Defaults fill in what a resource lacks and never replace what it has.
	llm := reqs[0].traces.ResourceSpans()
	require.Equal(t, 3, llm.Len())
	assert.Equal(t, map[string]any{"wandb.entity": "acme", "wandb.project": "llm", "service.name": "megatron"}, llm.At(0).Resource().Attributes().AsRaw())
	assert.Equal(t, map[string]any{"wandb.project": "llm", "service.name": "megatron", "wandb.entity": "acme"}, llm.At(1).Resource().Attributes().AsRaw())
	assert.Equal(t, map[string]any{"wandb.entity": "acme", "wandb.project": "llm"}, llm.At(2).Resource().Attributes().AsRaw())
	assert.Equal(t, "https://opentelemetry.io/schemas/1.26.0", llm.At(1).SchemaUrl())
	assert.Equal(t, "nemo_lens", llm.At(1).ScopeSpans().At(0).Scope().Name())

	assert.Equal(t, before, encoded(t, td), "the incoming batch must not change")

	assert.Equal(t, int64(4), h.counter(t, metricDropped, attribute.String("reason", "missing_project")))
	warns := h.logged(zapcore.WarnLevel)
	require.Len(t, warns, 1)
	assert.Contains(t, warns[0].Message, "Set WANDB_ENTITY and WANDB_PROJECT in the training job")
	assert.Contains(t, warns[0].Message, "or set entity and project in the weave exporter")
	fields := warns[0].ContextMap()
	assert.Equal(t, int64(4), fields["dropped_spans"])
	assert.Equal(t, "wandb.project", fields["missing"])
	assert.Equal(t, "run7-rank3", fields["example_service.instance.id"])
	metadatatest.AssertEqualExporterWeaveSpansDropped(t, h.tel, []metricdata.DataPoint[int64]{
		{Value: 4, Attributes: attribute.NewSet(attribute.String("reason", "missing_project"))},
	}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
}

func TestAuthModes(t *testing.T) {
	for _, mode := range []AuthMode{AuthModeHeader, AuthModeBasic} {
		t.Run(string(mode), func(t *testing.T) {
			f := newFakeWeave(t, mode, nil)
			h := newHarness(t)
			exp := h.startTraces(t, testConfig(f))
			b := newTraceBuilder()
			b.resource(project("acme", "llm"), "s", 2)
			require.NoError(t, exp.ConsumeTraces(context.Background(), readOnly(b.td)))
			assert.Equal(t, names("s", 2), f.accepted())
		})
	}

	t.Run("wrong mode is refused", func(t *testing.T) {
		f := newFakeWeave(t, AuthModeBasic, nil)
		h := newHarness(t)
		cfg := testConfig(f)
		cfg.AuthMode = AuthModeHeader
		exp := h.startTraces(t, cfg)
		b := newTraceBuilder()
		b.resource(project("acme", "llm"), "s", 2)
		err := exp.ConsumeTraces(context.Background(), readOnly(b.td))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "HTTP 401")
		assert.Contains(t, err.Error(), "auth_mode (now header)")
	})
}

func TestCompressionEncodings(t *testing.T) {
	for _, tc := range []struct {
		compression configcompression.Type
		want        string
	}{
		{configcompression.TypeGzip, "gzip"},
		{configcompression.TypeDeflate, "deflate"},
		{"none", ""},
	} {
		t.Run(string(tc.compression), func(t *testing.T) {
			f := newFakeWeave(t, AuthModeHeader, nil)
			h := newHarness(t)
			cfg := testConfig(f)
			cfg.ClientConfig.Compression = tc.compression
			exp := h.startTraces(t, cfg)
			b := newTraceBuilder()
			b.resource(project("acme", "llm"), "s", 3)
			require.NoError(t, exp.ConsumeTraces(context.Background(), readOnly(b.td)))
			reqs := f.received()
			require.Len(t, reqs, 1)
			assert.Equal(t, tc.want, reqs[0].encoding)
			assert.Equal(t, names("s", 3), f.accepted())
		})
	}
}

func TestRefusalsArePermanentAndSayWhatToCheck(t *testing.T) {
	tests := []struct {
		name     string
		reply    weaveReply
		requests int // requests the exporter makes: 401 and 404 stop the push
		want     []string
	}{
		{
			name:     "400 carries Weave's message",
			reply:    weaveReply{status: http.StatusBadRequest, contentType: "application/json", body: []byte(`{"detail":"span 1: attribute value too long"}`)},
			requests: 2,
			want:     []string{"as malformed (HTTP 400)", "Weave said: span 1: attribute value too long", "weave did not take 3 of 3 spans"},
		},
		{
			name:     "401 points at the API key",
			reply:    weaveReply{status: http.StatusUnauthorized, contentType: "text/plain", body: []byte("unauthorized")},
			requests: 1,
			want:     []string{"did not accept the API key (HTTP 401", "check that api_key (usually ${env:WANDB_API_KEY})", "weave did not take 3 of 3 spans"},
		},
		{
			name:     "403 points at write access to the entity/project",
			reply:    weaveReply{status: http.StatusForbidden},
			requests: 2,
			want:     []string{`refused to write 2 spans to entity "acme", project "llm" (HTTP 403)`, `entity "acme", project "rl"`, "write access to that entity and project", "WANDB_ENTITY/WANDB_PROJECT"},
		},
		{
			name:     "404 points at the endpoint",
			reply:    weaveReply{status: http.StatusNotFound},
			requests: 1,
			want:     []string{"endpoint not found (HTTP 404", "https://trace.wandb.ai/otel/v1/traces", "https://<host>/traces/otel/v1/traces"},
		},
		{
			name:     "500 is not retried",
			reply:    weaveReply{status: http.StatusInternalServerError, contentType: "application/x-protobuf", body: statusBody(t, "internal error")},
			requests: 2,
			want:     []string{"(HTTP 500 from", "Weave said: internal error"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeWeave(t, AuthModeHeader, func(int, weaveRequest) weaveReply { return tc.reply })
			h := newHarness(t)
			exp := h.startTraces(t, testConfig(f))
			b := newTraceBuilder()
			b.resource(project("acme", "llm"), "a", 2)
			b.resource(project("acme", "rl"), "b", 1)

			err := exp.ConsumeTraces(context.Background(), readOnly(b.td))
			require.Error(t, err)
			assert.True(t, consumererror.IsPermanent(err), "%v", err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), testAPIKey)
			assert.Len(t, f.received(), tc.requests, "refusals are not retried")
			assert.Empty(t, f.accepted())
		})
	}
}

func TestForbiddenProjectDoesNotStopOthers(t *testing.T) {
	f := newFakeWeave(t, AuthModeHeader, func(_ int, req weaveRequest) weaveReply {
		if req.project == "acme/secret" {
			return weaveReply{status: http.StatusForbidden, contentType: "application/json", body: []byte(`{"detail":"permission denied"}`)}
		}
		return weaveReply{status: http.StatusOK}
	})
	h := newHarness(t)
	exp := h.startTraces(t, testConfig(f))
	b := newTraceBuilder()
	b.resource(project("acme", "secret"), "x", 2)
	b.resource(project("acme", "llm"), "a", 3)

	err := exp.ConsumeTraces(context.Background(), readOnly(b.td))
	require.Error(t, err)
	assert.True(t, consumererror.IsPermanent(err))
	assert.Contains(t, err.Error(), "weave did not take 2 of 5 spans")
	assert.Contains(t, err.Error(), `entity "acme", project "secret"`)
	assert.Contains(t, err.Error(), "Weave said: permission denied")
	assert.Equal(t, names("a", 3), f.accepted())
	assert.Len(t, f.received(), 2)
}

// statusBody is an OTLP error body: a protobuf google.rpc.Status.
func statusBody(t *testing.T, msg string) []byte {
	b, err := proto.Marshal(&status.Status{Code: 13, Message: msg})
	require.NoError(t, err)
	return b
}

func TestPartialSuccessIsLoggedCountedAndNotRetried(t *testing.T) {
	for _, contentType := range []string{"application/x-protobuf", "application/json"} {
		t.Run(contentType, func(t *testing.T) {
			body := partialSuccessBody(t, 2, "2 spans rejected: attribute 'a' is both a value and an object")
			if contentType == "application/json" {
				body = []byte(`{"partialSuccess":{"rejectedSpans":"2","errorMessage":"2 spans rejected: attribute 'a' is both a value and an object"}}`)
			}
			f := newFakeWeave(t, AuthModeHeader, func(int, weaveRequest) weaveReply {
				return weaveReply{status: http.StatusOK, contentType: contentType, body: body}
			})
			h := newHarness(t)
			exp := h.startTraces(t, testConfig(f))
			b := newTraceBuilder()
			b.resource(project("acme", "llm"), "s", 5)

			require.NoError(t, exp.ConsumeTraces(context.Background(), readOnly(b.td)))
			assert.Len(t, f.received(), 1, "a partial success is not retried")
			assert.Equal(t, names("s", 5), f.accepted())
			assert.Equal(t, int64(2), h.counter(t, metricRejected))
			warns := h.logged(zapcore.WarnLevel)
			require.Len(t, warns, 1)
			assert.Contains(t, warns[0].Message, "rejected some spans (OTLP partial success)")
			fields := warns[0].ContextMap()
			assert.Equal(t, int64(2), fields["rejected_spans"])
			assert.Equal(t, int64(5), fields["sent_spans"])
			assert.Equal(t, "2 spans rejected: attribute 'a' is both a value and an object", fields["message"])
			assert.Equal(t, "acme", fields["entity"])
		})
	}
}

func TestRetryableStatusesAreRetriedWithoutDuplicates(t *testing.T) {
	for _, status := range []int{http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			// The second project's first attempt fails: the first project must
			// not be sent again when the rest is retried.
			f := newFakeWeave(t, AuthModeHeader, func(n int, _ weaveRequest) weaveReply {
				if n == 1 {
					return weaveReply{status: status}
				}
				return weaveReply{status: http.StatusOK}
			})
			h := newHarness(t)
			exp := h.startTraces(t, testConfig(f))
			b := newTraceBuilder()
			b.resource(project("acme", "llm"), "a", 3)
			b.resource(project("acme", "rl"), "b", 2)
			b.resource(project("acme", "llm"), "c", 1)

			require.NoError(t, exp.ConsumeTraces(context.Background(), readOnly(b.td)))
			reqs := f.received()
			require.Len(t, reqs, 3)
			assert.Equal(t, []string{"a-0", "a-1", "a-2", "c-0"}, reqs[0].spans)
			assert.Equal(t, names("b", 2), reqs[1].spans)
			assert.Equal(t, status, reqs[1].status)
			assert.Equal(t, names("b", 2), reqs[2].spans)
			assert.Equal(t, sorted(names("a", 3), names("b", 2), names("c", 1)), f.accepted())
		})
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	f := newFakeWeave(t, AuthModeHeader, func(n int, _ weaveRequest) weaveReply {
		if n == 0 {
			return weaveReply{status: http.StatusTooManyRequests, retryAfter: "1"}
		}
		return weaveReply{status: http.StatusOK}
	})
	h := newHarness(t)
	exp := h.startTraces(t, testConfig(f))
	b := newTraceBuilder()
	b.resource(project("acme", "llm"), "s", 4)

	require.NoError(t, exp.ConsumeTraces(context.Background(), readOnly(b.td)))
	assert.Len(t, f.received(), 2)
	assert.Equal(t, names("s", 4), f.accepted())
	var retryLog bool
	for _, e := range h.logs.All() {
		if strings.HasPrefix(e.Message, "Exporting failed. Will retry") {
			retryLog = true
			assert.Equal(t, "1s", e.ContextMap()["interval"], "the wait is Retry-After, not the 5ms backoff")
		}
	}
	assert.True(t, retryLog)
}

func TestRetryableErrorCarriesOnlyWhatIsLeft(t *testing.T) {
	f := newFakeWeave(t, AuthModeHeader, func(n int, _ weaveRequest) weaveReply {
		if n == 1 {
			return weaveReply{status: http.StatusTooManyRequests, retryAfter: "7"}
		}
		return weaveReply{status: http.StatusOK}
	})
	h := newHarness(t)
	e := h.startExporter(t, testConfig(f))
	b := newTraceBuilder()
	b.resource(project("acme", "llm"), "a", 2)
	b.resource(project("acme", "rl"), "b", 2)
	b.resource(map[string]any{"service.name": "no-project"}, "d", 1)
	b.resource(project("acme", "rl"), "c", 1)

	err := e.pushTraces(context.Background(), readOnly(b.td))
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err))
	assert.Contains(t, err.Error(), "Throttle (7s)")
	assert.Contains(t, err.Error(), "busy or unavailable (HTTP 429")
	var left consumererror.Traces
	require.True(t, errors.As(err, &left))
	rest := left.Data()
	require.Equal(t, 2, rest.ResourceSpans().Len())
	assert.Equal(t, "b-0", rest.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Name())
	assert.Equal(t, "c-0", rest.ResourceSpans().At(1).ScopeSpans().At(0).Spans().At(0).Name())
	assert.Equal(t, 3, rest.SpanCount())
	assert.Equal(t, "acme", rest.ResourceSpans().At(0).Resource().Attributes().AsRaw()["wandb.entity"])
	assert.Equal(t, names("a", 2), f.accepted())
}

func TestRetryAfterParsing(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		values []string
		want   time.Duration
		ok     bool
	}{
		{nil, 0, false},
		{[]string{"3"}, 3 * time.Second, true},
		{[]string{" 0 "}, 0, true},
		{[]string{"-5"}, 0, true},
		{[]string{"Sun, 01 Jun 2025 12:00:30 GMT"}, 30 * time.Second, true},
		{[]string{"Sun, 01 Jun 2025 11:00:00 GMT"}, 0, true},
		{[]string{"soon"}, 0, false},
	}
	for _, tc := range tests {
		got, ok := retryAfter(tc.values, now)
		assert.Equal(t, tc.ok, ok, "%v", tc.values)
		assert.Equal(t, tc.want, got, "%v", tc.values)
	}
}

func TestTooLargeHalvesAndLearns(t *testing.T) {
	const maxSpans = 3
	f := newFakeWeave(t, AuthModeHeader, func(_ int, req weaveRequest) weaveReply {
		if len(req.spans) > maxSpans {
			return weaveReply{status: http.StatusRequestEntityTooLarge}
		}
		return weaveReply{status: http.StatusOK}
	})
	h := newHarness(t)
	exp := h.startTraces(t, testConfig(f))
	// Spans big enough that the learned limit stays above the 1 KiB floor.
	padded := func(prefix string) ptrace.Traces {
		b := newTraceBuilder()
		rs := b.resource(project("acme", "llm"), prefix, 10)
		forEachSpan(rs, func(s ptrace.Span) { s.Attributes().PutStr("payload", strings.Repeat("p", 400)) })
		return readOnly(b.td)
	}

	require.NoError(t, exp.ConsumeTraces(context.Background(), padded("s")))
	assert.Equal(t, names("s", 10), f.accepted())
	refused := 0
	for _, r := range f.received() {
		if r.status == http.StatusRequestEntityTooLarge {
			refused++
		}
	}
	assert.Equal(t, 3, refused, "10 spans -> 5+5 -> 2+3+2+3")
	assert.Equal(t, int64(refused), h.counter(t, metricTooLarge))
	var lowered int
	for _, e := range h.logged(zapcore.WarnLevel) {
		if strings.Contains(e.Message, "sending smaller requests from now on") {
			lowered++
		}
	}
	assert.Equal(t, 2, lowered)

	// The next batch is cut to the learned size: no refusal.
	before := len(f.received())
	require.NoError(t, exp.ConsumeTraces(context.Background(), padded("t")))
	for _, r := range f.received()[before:] {
		assert.Equal(t, http.StatusOK, r.status)
	}
	assert.Equal(t, sorted(names("s", 10), names("t", 10)), f.accepted())
}

func TestTooLargeSingleSpanIsDropped(t *testing.T) {
	f := newFakeWeave(t, AuthModeHeader, func(_ int, req weaveRequest) weaveReply {
		for _, s := range req.spans {
			if s == "huge" {
				return weaveReply{status: http.StatusRequestEntityTooLarge}
			}
		}
		return weaveReply{status: http.StatusOK}
	})
	h := newHarness(t)
	exp := h.startTraces(t, testConfig(f))
	b := newTraceBuilder()
	rs := b.resource(project("acme", "llm"), "s", 3)
	b.span(rs.ScopeSpans().At(0), "huge").Attributes().PutStr("payload", strings.Repeat("x", 10000))

	err := exp.ConsumeTraces(context.Background(), readOnly(b.td))
	require.Error(t, err)
	assert.True(t, consumererror.IsPermanent(err))
	assert.Contains(t, err.Error(), `weave refused a request holding a single span ("huge"`)
	assert.Contains(t, err.Error(), "weave did not take 1 of 4 spans")
	assert.Equal(t, names("s", 3), f.accepted())
	assert.Equal(t, int64(1), h.counter(t, metricDropped, attribute.String("reason", "too_large")))
}

func TestMaxRequestBytesSplitsBatches(t *testing.T) {
	f := newFakeWeave(t, AuthModeHeader, nil)
	h := newHarness(t)
	cfg := testConfig(f)
	cfg.MaxRequestBytes = 2048
	exp := h.startTraces(t, cfg)
	b := newTraceBuilder()
	b.resource(project("acme", "llm"), "a", 60)
	rs := b.resource(project("acme", "llm"), "b", 40)
	second := rs.ScopeSpans().AppendEmpty()
	second.Scope().SetName("megatron.core")
	for _, n := range names("c", 20) {
		b.span(second, n)
	}

	require.NoError(t, exp.ConsumeTraces(context.Background(), readOnly(b.td)))
	reqs := f.received()
	assert.Greater(t, len(reqs), 3)
	for _, r := range reqs {
		assert.LessOrEqual(t, r.bodyBytes, 2048)
	}
	assert.Equal(t, sorted(names("a", 60), names("b", 40), names("c", 20)), f.accepted())
}

// mapsOf returns every attribute map Weave nests in a request.
func mapsOf(td ptrace.Traces) []pcommon.Map {
	var out []pcommon.Map
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		out = append(out, rs.Resource().Attributes())
		forEachSpan(rs, func(s ptrace.Span) {
			out = append(out, s.Attributes())
			for j := 0; j < s.Events().Len(); j++ {
				out = append(out, s.Events().At(j).Attributes())
			}
			for j := 0; j < s.Links().Len(); j++ {
				out = append(out, s.Links().At(j).Attributes())
			}
		})
	}
	return out
}

func spanNamed(t *testing.T, td ptrace.Traces, name string) ptrace.Span {
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		var found ptrace.Span
		ok := false
		forEachSpan(td.ResourceSpans().At(i), func(s ptrace.Span) {
			if s.Name() == name {
				found, ok = s, true
			}
		})
		if ok {
			return found
		}
	}
	t.Fatalf("span %q not found", name)
	return ptrace.Span{}
}

func TestDottedKeyConflictsAreRenamed(t *testing.T) {
	f := newFakeWeave(t, AuthModeHeader, nil)
	h := newHarness(t)
	exp := h.startTraces(t, testConfig(f))

	b := newTraceBuilder()
	slurm := project("acme", "llm")
	slurm["slurm.job.id"] = "4242"
	slurm["slurm.job.id.raw"] = "4242_7"
	rs := b.resource(slurm, "r", 1)
	ss := rs.ScopeSpans().At(0)
	b.span(ss, "span-conflict").Attributes().PutStr("megatron", "x") // vs megatron.iteration
	ev := b.span(ss, "event-conflict").Events().AppendEmpty()
	ev.SetName("checkpoint")
	ev.Attributes().PutStr("ckpt", "/ckpt/1")
	ev.Attributes().PutInt("ckpt.bytes", 1<<30)
	lk := b.span(ss, "link-conflict").Links().AppendEmpty()
	lk.Attributes().PutStr("peer", "rank0")
	lk.Attributes().PutStr("peer.stage", "pp1")

	clean := b.resource(project("acme", "llm"), "clean", 1)
	b.span(clean.ScopeSpans().At(0), "clean-conflict").Attributes().PutStr("megatron.loss.scaled", "y") // vs megatron.loss
	td := readOnly(b.td)
	before := encoded(t, td)

	require.NoError(t, exp.ConsumeTraces(context.Background(), td))
	reqs := f.received()
	require.Len(t, reqs, 1)
	got := reqs[0].traces
	for _, m := range mapsOf(got) {
		keys := []string{}
		for k := range m.All() {
			keys = append(keys, k)
		}
		assert.False(t, keysConflict(keys), "Weave could not nest %v", keys)
	}
	res := got.ResourceSpans().At(0).Resource().Attributes().AsRaw()
	assert.Equal(t, "4242", res["slurm.job.id._value"])
	assert.Equal(t, "4242_7", res["slurm.job.id.raw"])
	assert.NotContains(t, res, "slurm.job.id")
	assert.Equal(t, "x", spanNamed(t, got, "span-conflict").Attributes().AsRaw()["megatron._value"])
	assert.Equal(t, map[string]any{"ckpt._value": "/ckpt/1", "ckpt.bytes": int64(1 << 30)}, spanNamed(t, got, "event-conflict").Events().At(0).Attributes().AsRaw())
	assert.Equal(t, map[string]any{"peer._value": "rank0", "peer.stage": "pp1"}, spanNamed(t, got, "link-conflict").Links().At(0).Attributes().AsRaw())
	cleanSpan := spanNamed(t, got, "clean-conflict").Attributes().AsRaw()
	assert.Equal(t, 2.25, cleanSpan["megatron.loss._value"])
	assert.Equal(t, "y", cleanSpan["megatron.loss.scaled"])
	// Untouched spans keep their attributes exactly.
	assert.Equal(t, map[string]any{"megatron.iteration": int64(1), "megatron.loss": 2.25}, spanNamed(t, got, "r-0").Attributes().AsRaw())
	assert.Equal(t, map[string]any{"megatron.iteration": int64(5), "megatron.loss": 2.25}, spanNamed(t, got, "clean-0").Attributes().AsRaw())

	assert.Equal(t, before, encoded(t, td), "the incoming batch must not change")
	// The 4 spans under the slurm resource, and clean-conflict.
	assert.Equal(t, int64(5), h.counter(t, metricRenamed))
	var renames []string
	for _, e := range h.logged(zapcore.InfoLevel) {
		if strings.HasPrefix(e.Message, "Renamed an attribute key") {
			m := e.ContextMap()
			renames = append(renames, m["attributes"].(string)+":"+m["from"].(string)+"->"+m["to"].(string))
		}
	}
	assert.ElementsMatch(t, []string{
		"resource:slurm.job.id->slurm.job.id._value",
		"span:megatron->megatron._value",
		"event:ckpt->ckpt._value",
		"link:peer->peer._value",
		"span:megatron.loss->megatron.loss._value",
	}, renames)

	// The same renames in a later batch are counted, not logged again.
	require.NoError(t, exp.ConsumeTraces(context.Background(), td))
	assert.Equal(t, int64(10), h.counter(t, metricRenamed))
	again := 0
	for _, e := range h.logged(zapcore.InfoLevel) {
		if strings.HasPrefix(e.Message, "Renamed an attribute key") {
			again++
		}
	}
	assert.Equal(t, 5, again)
}

func TestRunLinking(t *testing.T) {
	build := func() ptrace.Traces {
		b := newTraceBuilder()
		linked := project("acme", "llm")
		linked["nemo.run.id"] = "run42"
		rs := b.resource(linked, "l", 2)
		b.span(rs.ScopeSpans().At(0), "explicit").Attributes().PutStr("wandb.wb_run_id", "other7")
		conflict := b.span(rs.ScopeSpans().At(0), "conflict")
		conflict.Attributes().PutStr("q", "1")
		conflict.Attributes().PutStr("q.r", "2")
		bad := project("acme", "llm")
		bad["nemo.run.id"] = "acme/llm/run42"
		b.resource(bad, "bad", 1)
		b.resource(project("acme", "llm"), "none", 1)
		return readOnly(b.td)
	}

	t.Run("from run_id_attribute", func(t *testing.T) {
		f := newFakeWeave(t, AuthModeHeader, nil)
		h := newHarness(t)
		cfg := testConfig(f)
		cfg.RunIDAttribute = "nemo.run.id"
		exp := h.startTraces(t, cfg)
		td := build()
		before := encoded(t, td)

		require.NoError(t, exp.ConsumeTraces(context.Background(), td))
		reqs := f.received()
		require.Len(t, reqs, 1)
		got := reqs[0].traces
		runID := func(name string) any {
			return spanNamed(t, got, name).Attributes().AsRaw()["wandb.wb_run_id"]
		}
		assert.Equal(t, "run42", runID("l-0"))
		assert.Equal(t, "run42", runID("l-1"))
		assert.Equal(t, "other7", runID("explicit"), "a span's own run id wins")
		assert.Equal(t, "run42", runID("conflict"))
		assert.Equal(t, "1", spanNamed(t, got, "conflict").Attributes().AsRaw()["q._value"])
		assert.Nil(t, runID("bad-0"))
		assert.Nil(t, runID("none-0"))
		assert.Equal(t, sorted(names("l", 2), []string{"explicit", "conflict", "bad-0", "none-0"}), f.accepted())
		assert.Equal(t, before, encoded(t, td))
		assert.Equal(t, int64(3), h.counter(t, metricLinked))

		warns := h.logged(zapcore.WarnLevel)
		require.Len(t, warns, 1)
		assert.Contains(t, warns[0].Message, "Spans not linked to a W&B run")
		assert.Equal(t, int64(2), warns[0].ContextMap()["unlinked_spans"])
		assert.Contains(t, warns[0].ContextMap()["reason"], `nemo.run.id="acme/llm/run42" is not a bare W&B run id`)
	})

	t.Run("off by default", func(t *testing.T) {
		f := newFakeWeave(t, AuthModeHeader, nil)
		h := newHarness(t)
		exp := h.startTraces(t, testConfig(f))
		require.NoError(t, exp.ConsumeTraces(context.Background(), build()))
		got := f.received()[0].traces
		assert.Nil(t, spanNamed(t, got, "l-0").Attributes().AsRaw()["wandb.wb_run_id"])
		assert.Equal(t, int64(0), h.counter(t, metricLinked))
		assert.Empty(t, h.logged(zapcore.WarnLevel))
	})
}

func TestMissingProjectWarningIsRateLimited(t *testing.T) {
	f := newFakeWeave(t, AuthModeHeader, nil)
	h := newHarness(t)
	e := h.startExporter(t, testConfig(f))
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	e.now = func() time.Time { return now }
	push := func() {
		b := newTraceBuilder()
		b.resource(map[string]any{"service.name": "megatron"}, "x", 2)
		b.resource(project("acme", "llm"), "ok", 1)
		require.NoError(t, e.pushTraces(context.Background(), readOnly(b.td)))
	}

	push()
	now = now.Add(10 * time.Second)
	push()
	push()
	now = now.Add(time.Minute)
	push()

	warns := h.logged(zapcore.WarnLevel)
	require.Len(t, warns, 2)
	assert.Equal(t, int64(2), warns[0].ContextMap()["dropped_spans"])
	assert.Equal(t, int64(6), warns[1].ContextMap()["dropped_spans"], "the spans dropped while the warning was held back")
	assert.Equal(t, "wandb.entity and wandb.project", warns[1].ContextMap()["missing"])
	assert.Equal(t, int64(8), h.counter(t, metricDropped, attribute.String("reason", "missing_project")))
	assert.Len(t, f.accepted(), 4)
}

func TestAPIKeyNeverLeaks(t *testing.T) {
	echo := []byte(`{"detail":"invalid key ` + testAPIKey + `"}`)
	f := newFakeWeave(t, AuthModeHeader, func(n int, _ weaveRequest) weaveReply {
		switch n {
		case 0:
			return weaveReply{status: http.StatusOK, contentType: "application/x-protobuf", body: partialSuccessBody(t, 1, "bad span from key "+testAPIKey)}
		case 1:
			return weaveReply{status: http.StatusBadRequest, contentType: "application/json", body: echo}
		default:
			return weaveReply{status: http.StatusUnauthorized, contentType: "application/json", body: echo}
		}
	})
	h := newHarness(t)
	exp := h.startTraces(t, testConfig(f))
	var errs []error
	for range 3 {
		b := newTraceBuilder()
		b.resource(project("acme", "llm"), "s", 1)
		b.resource(map[string]any{}, "nop", 1)
		errs = append(errs, exp.ConsumeTraces(context.Background(), readOnly(b.td)))
	}
	require.NoError(t, errs[0])
	require.Error(t, errs[1])
	require.Error(t, errs[2])
	for _, err := range errs[1:] {
		assert.NotContains(t, err.Error(), testAPIKey)
		assert.Contains(t, err.Error(), "[REDACTED]")
	}
	require.NotEmpty(t, h.logs.All())
	for _, e := range h.logs.All() {
		assert.NotContains(t, e.Message, testAPIKey)
		for k, v := range e.ContextMap() {
			assert.NotContains(t, k, testAPIKey)
			if s, ok := v.(string); ok {
				assert.NotContains(t, s, testAPIKey)
			}
		}
	}
}

func TestNetworkErrorsAreRetryable(t *testing.T) {
	f := newFakeWeave(t, AuthModeHeader, nil)
	h := newHarness(t)
	e := h.startExporter(t, testConfig(f))
	f.srv.Close()
	b := newTraceBuilder()
	b.resource(project("acme", "llm"), "s", 1)
	err := e.pushTraces(context.Background(), readOnly(b.td))
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err))
	assert.Contains(t, err.Error(), "send to weave")
}

func TestServerMessage(t *testing.T) {
	long := strings.Repeat("é", 400)
	tests := []struct {
		name string
		res  response
		want string
	}{
		{"empty", response{}, ""},
		{"fastapi detail", response{contentType: "application/json", body: []byte(`{"detail": "Project not found"}`)}, "Project not found"},
		{"structured detail", response{contentType: "application/json", body: []byte(`{"detail": [{"loc": ["body"], "msg": "bad"}]}`)}, `[{"loc":["body"],"msg":"bad"}]`},
		{"message", response{contentType: "application/problem+json", body: []byte(`{"message": "nope"}`)}, "nope"},
		{"not json", response{contentType: "application/json", body: []byte(`<html>`)}, "<html>"},
		{"status proto", response{contentType: "application/x-protobuf", body: statusBody(t, "quota exceeded")}, "quota exceeded"},
		{"text, multi-line", response{contentType: "text/plain", body: []byte("line one\n  line two\t")}, "line one line two"},
		{"binary", response{contentType: "application/octet-stream", body: []byte{0xff, 0xfe, 0x00}}, ""},
		{"secret", response{contentType: "text/plain", body: []byte("key=" + testAPIKey)}, "key=[REDACTED]"},
		{"bounded", response{contentType: "text/plain", body: []byte(long)}, long[:512] + "..."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, serverMessage(tc.res, testAPIKey))
		})
	}
}

func TestSecretsCoverBasicCredentials(t *testing.T) {
	e := &weaveExporter{cfg: &Config{APIKey: testAPIKey, AuthMode: AuthModeBasic}}
	res := response{contentType: "text/plain", body: []byte("bad header: Basic " + basicCredentials(testAPIKey) + " for " + testAPIKey)}
	assert.Equal(t, "bad header: Basic [REDACTED] for [REDACTED]", serverMessage(res, e.secrets()...))
}
