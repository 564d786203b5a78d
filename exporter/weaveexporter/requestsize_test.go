// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package weaveexporter

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap/zapcore"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lettertest"
)

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

	require.NoError(t, exp.ConsumeTraces(t.Context(), padded("s")))
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
	require.NoError(t, exp.ConsumeTraces(t.Context(), padded("t")))
	for _, r := range f.received()[before:] {
		assert.Equal(t, http.StatusOK, r.status)
	}
	assert.Equal(t, sorted(names("s", 10), names("t", 10)), f.accepted())
}

func TestTooLargeSingleSpanIsDeadLettered(t *testing.T) {
	f := newFakeWeave(t, AuthModeHeader, func(_ int, req weaveRequest) weaveReply {
		if slices.Contains(req.spans, "huge") {
			return weaveReply{status: http.StatusRequestEntityTooLarge}
		}
		return weaveReply{status: http.StatusOK}
	})
	h := newHarness(t)
	exp := h.startTraces(t, testConfig(f))
	b := newTraceBuilder()
	rs := b.resource(project("acme", "llm"), "s", 3)
	b.span(rs.ScopeSpans().At(0), "huge").Attributes().PutStr("payload", strings.Repeat("x", 10000))

	require.NoError(t, exp.ConsumeTraces(t.Context(), readOnly(b.td)))
	assert.Equal(t, names("s", 3), f.accepted())
	lines, n := f.deadLetters(t)
	require.Len(t, lines, 1)
	assert.Equal(t, 1, n)
	assert.Equal(t, []string{"huge"}, letterSpans(lines))
	assert.Contains(t, lettertest.Error(lines[0]), `weave refused a request holding a single span ("huge"`)
	assert.Equal(t, int64(1), h.counter(t, metricDeadLetters, attribute.String("reason", "refused")))
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

	require.NoError(t, exp.ConsumeTraces(t.Context(), readOnly(b.td)))
	reqs := f.received()
	assert.Greater(t, len(reqs), 3)
	for _, r := range reqs {
		assert.LessOrEqual(t, r.bodyBytes, 2048)
	}
	assert.Equal(t, sorted(names("a", 60), names("b", 40), names("c", 20)), f.accepted())
}
