// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package weaveexporter

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap/zapcore"

	"github.com/nemo-lens/otelcol-nemo/exporter/weaveexporter/internal/metadatatest"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lettertest"
)

func TestExportSplitsByProjectAndDeadLettersSpansWithoutOne(t *testing.T) {
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

	require.NoError(t, exp.ConsumeTraces(t.Context(), td))

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

	lines, n := f.deadLetters(t)
	require.Len(t, lines, 1)
	assert.Equal(t, 4, n)
	assert.Equal(t, names("d", 4), letterSpans(lines))
	assert.Equal(t, "unroutable", lettertest.Reason(lines[0]))
	assert.Contains(t, lettertest.Error(lines[0]), "Set WANDB_ENTITY and WANDB_PROJECT in the training job")
	assert.Equal(t, "run7-rank3", lines[0].ResourceSpans().At(0).Resource().Attributes().AsRaw()["service.instance.id"], "as it came")
	warns := h.logged(zapcore.WarnLevel)
	require.Len(t, warns, 1)
	assert.Contains(t, warns[0].Message, "written to the run's dead-letter file")
	metadatatest.AssertEqualExporterWeaveDeadLetters(t, h.tel, []metricdata.DataPoint[int64]{
		{Value: 4, Attributes: attribute.NewSet(attribute.String("exporter", "weave"), attribute.String("reason", "unroutable"))},
	}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
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

		require.NoError(t, exp.ConsumeTraces(t.Context(), td))
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
		require.NoError(t, exp.ConsumeTraces(t.Context(), build()))
		got := f.received()[0].traces
		assert.Nil(t, spanNamed(t, got, "l-0").Attributes().AsRaw()["wandb.wb_run_id"])
		assert.Equal(t, int64(0), h.counter(t, metricLinked))
		assert.Empty(t, h.logged(zapcore.WarnLevel))
	})
}
