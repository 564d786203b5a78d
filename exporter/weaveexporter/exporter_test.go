// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package weaveexporter

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lettertest"
)

const (
	metricDeadLetters = "otelcol_exporter_weave_dead_letters"
	metricRejected    = "otelcol_exporter_weave_spans_rejected"
	metricRenamed     = "otelcol_exporter_weave_spans_renamed"
	metricLinked      = "otelcol_exporter_weave_spans_run_linked"
	metricTooLarge    = "otelcol_exporter_weave_requests_too_large"
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

func TestAuthModes(t *testing.T) {
	for _, mode := range []AuthMode{AuthModeHeader, AuthModeBasic} {
		t.Run(string(mode), func(t *testing.T) {
			f := newFakeWeave(t, mode, nil)
			h := newHarness(t)
			exp := h.startTraces(t, testConfig(f))
			b := newTraceBuilder()
			b.resource(project("acme", "llm"), "s", 2)
			require.NoError(t, exp.ConsumeTraces(t.Context(), readOnly(b.td)))
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
		require.NoError(t, exp.ConsumeTraces(t.Context(), readOnly(b.td)))
		lines, n := f.deadLetters(t)
		require.Len(t, lines, 1)
		assert.Equal(t, 2, n)
		assert.Contains(t, lettertest.Error(lines[0]), "HTTP 401")
		assert.Contains(t, lettertest.Error(lines[0]), "auth_mode (now header)")
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
			require.NoError(t, exp.ConsumeTraces(t.Context(), readOnly(b.td)))
			reqs := f.received()
			require.Len(t, reqs, 1)
			assert.Equal(t, tc.want, reqs[0].encoding)
			assert.Equal(t, names("s", 3), f.accepted())
		})
	}
}
