// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package weaveexporter

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lettertest"
)

// A letter holds the request as Weave would have received it (the
// defaults added), under the run of its resource: a replay through nemo_otlp
// to Weave's OTLP endpoint sends what this exporter would have.
func TestALetterIsTheRequestAsSentUnderItsRun(t *testing.T) {
	f := newFakeWeave(t, AuthModeHeader, func(int, weaveRequest) weaveReply { return weaveReply{status: http.StatusForbidden} })
	h := newHarness(t)
	cfg := testConfig(f)
	cfg.Entity = "acme"
	exp := h.startTraces(t, cfg)
	b := newTraceBuilder()
	b.resource(map[string]any{"wandb.project": "llm", "nemo.run.id": "run-7"}, "s", 3)

	require.NoError(t, exp.ConsumeTraces(t.Context(), readOnly(b.td)))
	lines, n := lettertest.Traces(t, f.letters, "run-7", "weave")
	require.Len(t, lines, 1)
	assert.Equal(t, 3, n)
	attrs := lines[0].ResourceSpans().At(0).Resource().Attributes().AsRaw()
	assert.Equal(t, "acme", attrs["wandb.entity"], "the entity default, as sent")
	assert.Equal(t, "llm", attrs["wandb.project"])
	assert.Equal(t, "refused", attrs["nemo.dead_letter.reason"])
	assert.NotEmpty(t, attrs["nemo.dead_letter.time"])
}

func TestTheRetryWindowRunningOutDeadLettersWhatIsLeft(t *testing.T) {
	f := newFakeWeave(t, AuthModeHeader, func(_ int, req weaveRequest) weaveReply {
		if req.project == "acme/rl" {
			return weaveReply{status: http.StatusServiceUnavailable}
		}
		return weaveReply{status: http.StatusOK}
	})
	h := newHarness(t)
	cfg := testConfig(f)
	cfg.RetryConfig.MaxElapsedTime = 300 * time.Millisecond
	exp := h.startTraces(t, cfg)
	b := newTraceBuilder()
	b.resource(project("acme", "llm"), "a", 2)
	b.resource(project("acme", "rl"), "b", 3)

	start := time.Now()
	require.NoError(t, exp.ConsumeTraces(t.Context(), readOnly(b.td)))
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "retried for the window")
	assert.Equal(t, names("a", 2), f.accepted(), "delivered once: the remainder is what is retried")
	assert.Greater(t, len(f.received()), 3, "the rest was retried")
	lines, n := f.deadLetters(t)
	require.Len(t, lines, 1)
	assert.Equal(t, 3, n)
	assert.Equal(t, names("b", 3), letterSpans(lines))
	assert.Equal(t, "retry_window", lettertest.Reason(lines[0]))
	assert.Contains(t, lettertest.Error(lines[0]), "retry_on_failure::max_elapsed_time 300ms")
	assert.Contains(t, lettertest.Error(lines[0]), "HTTP 503")
	assert.Equal(t, int64(3), h.counter(t, metricDeadLetters, attribute.String("reason", "retry_window")))
}

func TestRetryDisabledDeadLettersAtOnce(t *testing.T) {
	f := newFakeWeave(t, AuthModeHeader, func(int, weaveRequest) weaveReply { return weaveReply{status: http.StatusServiceUnavailable} })
	h := newHarness(t)
	cfg := testConfig(f)
	cfg.RetryConfig.Enabled = false
	exp := h.startTraces(t, cfg)
	b := newTraceBuilder()
	b.resource(project("acme", "llm"), "a", 2)

	require.NoError(t, exp.ConsumeTraces(t.Context(), readOnly(b.td)))
	assert.Len(t, f.received(), 1)
	lines, n := f.deadLetters(t)
	require.Len(t, lines, 1)
	assert.Equal(t, 2, n)
	assert.Contains(t, lettertest.Error(lines[0]), "retry_on_failure is disabled")
}

// A letter that cannot be written is not lost: its spans, as they came, go
// back to the retry sender with what is left to send, and are written once
// the directory can be.
func TestALetterThatCannotBeWrittenIsRetried(t *testing.T) {
	f := newFakeWeave(t, AuthModeHeader, func(_ int, req weaveRequest) weaveReply {
		if req.project == "acme/secret" {
			return weaveReply{status: http.StatusForbidden}
		}
		return weaveReply{status: http.StatusOK}
	})
	h := newHarness(t)
	cfg := testConfig(f)
	blocked := filepath.Join(t.TempDir(), "not-a-directory")
	require.NoError(t, os.WriteFile(blocked, nil, 0o600))
	cfg.DeadLetter.Directory = blocked
	e := h.startExporter(t, cfg)
	b := newTraceBuilder()
	b.resource(project("acme", "llm"), "a", 2)
	b.resource(project("acme", "secret"), "x", 2)
	b.resource(map[string]any{"service.name": "no-project"}, "d", 1)

	err := e.pushTraces(t.Context(), readOnly(b.td))
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err))
	var left consumererror.Traces
	require.ErrorAs(t, err, &left)
	rest := left.Data()
	assert.Equal(t, sorted(names("d", 1), names("x", 2)), letterSpans([]ptrace.Traces{rest}))
	assert.Equal(t, names("a", 2), f.accepted())

	// The directory fixed, the remainder is dead-lettered.
	require.NoError(t, os.Remove(blocked))
	require.NoError(t, e.pushTraces(t.Context(), rest))
	assert.Equal(t, names("a", 2), f.accepted(), "nothing sent twice")
	lines, n := lettertest.Traces(t, blocked, "unknown", "weave")
	assert.Equal(t, 3, n)
	assert.Equal(t, sorted(names("d", 1), names("x", 2)), letterSpans(lines))
}
