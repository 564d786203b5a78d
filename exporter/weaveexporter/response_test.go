// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package weaveexporter

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap/zapcore"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lettertest"
)

func TestRefusalsAreDeadLetteredAndSayWhatToCheck(t *testing.T) {
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
			want:     []string{"as malformed (HTTP 400)", "Weave said: span 1: attribute value too long"},
		},
		{
			name:     "401 points at the API key",
			reply:    weaveReply{status: http.StatusUnauthorized, contentType: "text/plain", body: []byte("unauthorized")},
			requests: 1,
			want:     []string{"did not accept the API key (HTTP 401", "check that api_key (usually ${env:WANDB_API_KEY})"},
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

			require.NoError(t, exp.ConsumeTraces(t.Context(), readOnly(b.td)), "dead-lettered, the request leaves the queue")
			assert.Len(t, f.received(), tc.requests, "refusals are not retried")
			assert.Empty(t, f.accepted())

			lines, n := f.deadLetters(t)
			assert.Equal(t, 3, n)
			assert.Equal(t, sorted(names("a", 2), names("b", 1)), letterSpans(lines))
			var errs []string
			for _, l := range lines {
				assert.Equal(t, "refused", lettertest.Reason(l))
				assert.NotContains(t, lettertest.Error(l), "Permanent error")
				errs = append(errs, lettertest.Error(l))
			}
			all := strings.Join(errs, "\n")
			for _, w := range tc.want {
				assert.Contains(t, all, w)
			}
			assert.NotContains(t, all, testAPIKey)
			assert.Equal(t, int64(3), h.counter(t, metricDeadLetters, attribute.String("reason", "refused"), attribute.String("exporter", "weave")))
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

	require.NoError(t, exp.ConsumeTraces(t.Context(), readOnly(b.td)))
	assert.Equal(t, names("a", 3), f.accepted())
	assert.Len(t, f.received(), 2)
	lines, n := f.deadLetters(t)
	require.Len(t, lines, 1)
	assert.Equal(t, 2, n)
	assert.Equal(t, names("x", 2), letterSpans(lines))
	assert.Contains(t, lettertest.Error(lines[0]), `entity "acme", project "secret"`)
	assert.Contains(t, lettertest.Error(lines[0]), "Weave said: permission denied")
}

// statusBody is an OTLP error body: a protobuf google.rpc.Status.
func statusBody(t *testing.T, msg string) []byte {
	b, err := proto.Marshal(&status.Status{Code: 13, Message: msg})
	require.NoError(t, err)
	return b
}

func TestPartialSuccessIsDeadLetteredWhole(t *testing.T) {
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

			require.NoError(t, exp.ConsumeTraces(t.Context(), readOnly(b.td)))
			assert.Len(t, f.received(), 1, "a partial success is not retried")
			assert.Equal(t, names("s", 5), f.accepted())
			assert.Equal(t, int64(2), h.counter(t, metricRejected))
			lines, n := f.deadLetters(t)
			require.Len(t, lines, 1)
			assert.Equal(t, 5, n, "OTLP says how many were rejected, not which: the whole request")
			assert.Equal(t, "partial_success", lettertest.Reason(lines[0]))
			assert.Equal(t, "partial success: weave rejected 2 of 5 spans for acme/llm: 2 spans rejected: attribute 'a' is both a value and an object", lettertest.Error(lines[0]))
			assert.Equal(t, int64(5), h.counter(t, metricDeadLetters, attribute.String("reason", "partial_success")))
		})
	}
}

func TestAWarningWithoutRejectionIsDelivered(t *testing.T) {
	f := newFakeWeave(t, AuthModeHeader, func(int, weaveRequest) weaveReply {
		return weaveReply{status: http.StatusOK, contentType: "application/x-protobuf", body: partialSuccessBody(t, 0, "attribute truncated")}
	})
	h := newHarness(t)
	exp := h.startTraces(t, testConfig(f))
	b := newTraceBuilder()
	b.resource(project("acme", "llm"), "s", 2)

	require.NoError(t, exp.ConsumeTraces(t.Context(), readOnly(b.td)))
	_, n := f.deadLetters(t)
	assert.Zero(t, n)
	warns := h.logged(zapcore.WarnLevel)
	require.Len(t, warns, 1)
	assert.Equal(t, "attribute truncated", warns[0].ContextMap()["message"])
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

			require.NoError(t, exp.ConsumeTraces(t.Context(), readOnly(b.td)))
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

	require.NoError(t, exp.ConsumeTraces(t.Context(), readOnly(b.td)))
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

	err := e.pushTraces(t.Context(), readOnly(b.td))
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err))
	assert.Contains(t, err.Error(), "Throttle (7s)")
	assert.Contains(t, err.Error(), "busy or unavailable (HTTP 429")
	var left consumererror.Traces
	require.ErrorAs(t, err, &left)
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
	for range 3 {
		b := newTraceBuilder()
		b.resource(project("acme", "llm"), "s", 1)
		b.resource(map[string]any{}, "nop", 1)
		require.NoError(t, exp.ConsumeTraces(t.Context(), readOnly(b.td)))
	}
	lines, _ := f.deadLetters(t)
	require.Len(t, lines, 6, "each push: the spans without a project, and the refused or rejected one")
	redacted := 0
	for _, l := range lines {
		assert.NotContains(t, lettertest.Error(l), testAPIKey)
		if strings.Contains(lettertest.Error(l), "[REDACTED]") {
			redacted++
		}
	}
	assert.Equal(t, 3, redacted, "the partial success's message and both refusals")
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
	err := e.pushTraces(t.Context(), readOnly(b.td))
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
