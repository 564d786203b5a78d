// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package weaveexporter

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap/zapcore"
)

func TestConflictRenames(t *testing.T) {
	tests := []struct {
		name string
		keys []string
		want []keyRename
	}{
		{name: "no keys"},
		{name: "no conflict", keys: []string{"a", "b.c", "ab", "a_b", "megatron.iteration", "megatron.loss"}},
		{name: "similar prefix is not a conflict", keys: []string{"a", "ab.c", "a-b.c"}},
		{
			name: "slurm job id and its raw form",
			keys: []string{"slurm.job.id", "slurm.job.id.raw", "slurm.job.name"},
			want: []keyRename{{"slurm.job.id", "slurm.job.id._value"}},
		},
		{
			name: "deep extension",
			keys: []string{"a", "a.b.c.d"},
			want: []keyRename{{"a", "a._value"}},
		},
		{
			name: "chain",
			keys: []string{"a.b.c", "a", "a.b"},
			want: []keyRename{{"a", "a._value"}, {"a.b", "a.b._value"}},
		},
		{
			name: "value key taken",
			keys: []string{"a", "a.b", "a._value"},
			want: []keyRename{{"a", "a._value2"}},
		},
		{
			name: "value key extended",
			keys: []string{"a", "a.b", "a._value.x"},
			want: []keyRename{{"a", "a._value2"}},
		},
		{
			name: "value keys taken twice",
			keys: []string{"k", "k.x", "k._value", "k._value2"},
			want: []keyRename{{"k", "k._value3"}},
		},
		{
			name: "trailing dot",
			keys: []string{"a", "a."},
			want: []keyRename{{"a", "a._value"}},
		},
		{
			name: "empty key",
			keys: []string{"", ".x"},
			want: []keyRename{{"", "._value"}},
		},
		{
			name: "wandb keys stay intact",
			keys: []string{"wandb", "wandb.entity", "wandb.project", "wandb.wb_run_id"},
			want: []keyRename{{"wandb", "wandb._value"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := conflictRenames(tc.keys)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, len(tc.want) > 0, keysConflict(tc.keys), "keysConflict disagrees")

			after := applyRenames(tc.keys, got)
			assert.False(t, keysConflict(after), "still conflicting: %v", after)
			assert.Len(t, uniq(after), len(uniq(tc.keys)), "renames must not merge keys")

			// The result does not depend on the order of the attributes.
			rev := slices.Clone(tc.keys)
			slices.Reverse(rev)
			assert.Equal(t, tc.want, conflictRenames(rev))
		})
	}
}

func applyRenames(keys []string, renames []keyRename) []string {
	out := slices.Clone(keys)
	for i, k := range out {
		for _, r := range renames {
			if r.from == k {
				out[i] = r.to
			}
		}
	}
	return out
}

func uniq(keys []string) []string {
	out := slices.Clone(keys)
	slices.Sort(out)
	return slices.Compact(out)
}

func TestMapHasConflict(t *testing.T) {
	m := pcommon.NewMap()
	m.PutStr("wandb", "x")
	m.PutStr("service.name", "megatron")
	assert.False(t, mapHasConflict(m, ""))
	assert.True(t, mapHasConflict(m, "wandb.wb_run_id"), "the key about to be added counts")

	single := pcommon.NewMap()
	assert.False(t, mapHasConflict(single, ""))
	assert.False(t, mapHasConflict(single, "a.b"))

	// More keys than fit on the stack.
	many := pcommon.NewMap()
	for i := range 2 * maxStackKeys {
		many.PutInt(fmt.Sprintf("k%03d.v", i), int64(i))
	}
	assert.False(t, mapHasConflict(many, ""))
	many.PutStr("k090", "leaf")
	assert.True(t, mapHasConflict(many, ""))
}

func TestRenameConflictsKeepsOrderAndValues(t *testing.T) {
	m := pcommon.NewMap()
	require.NoError(t, m.FromRaw(map[string]any{}))
	m.PutStr("host.name", "node-1")
	m.PutStr("slurm.job.id", "4242")
	m.PutInt("dl.rank", 3)
	m.PutStr("slurm.job.id.raw", "4242_7")
	m.PutEmptyMap("slurm").PutStr("partition", "gpu")

	renames := renameConflicts(m)
	assert.Equal(t, []keyRename{{"slurm", "slurm._value"}, {"slurm.job.id", "slurm.job.id._value"}}, renames)
	var keys []string
	for k := range m.All() {
		keys = append(keys, k)
	}
	assert.Equal(t, []string{"host.name", "slurm.job.id._value", "dl.rank", "slurm.job.id.raw", "slurm._value"}, keys)
	assert.Equal(t, map[string]any{
		"host.name":           "node-1",
		"slurm.job.id._value": "4242",
		"dl.rank":             int64(3),
		"slurm.job.id.raw":    "4242_7",
		"slurm._value":        map[string]any{"partition": "gpu"},
	}, m.AsRaw())

	clean := pcommon.NewMap()
	clean.PutStr("a.b", "1")
	assert.Nil(t, renameConflicts(clean))
	assert.Equal(t, map[string]any{"a.b": "1"}, clean.AsRaw())
}

func TestSpanConflicts(t *testing.T) {
	td := ptrace.NewTraces()
	spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()

	clean := spans.AppendEmpty()
	clean.Attributes().PutStr("a.b", "1")
	clean.Events().AppendEmpty().Attributes().PutStr("e.f", "1")
	assert.False(t, spanHasConflict(clean, ""))
	assert.True(t, spanHasConflict(clean, "a"))

	inEvent := spans.AppendEmpty()
	inEvent.Events().AppendEmpty()
	ev := inEvent.Events().AppendEmpty().Attributes()
	ev.PutStr("x", "1")
	ev.PutStr("x.y", "2")
	assert.True(t, spanHasConflict(inEvent, ""))

	inLink := spans.AppendEmpty()
	l := inLink.Links().AppendEmpty().Attributes()
	l.PutStr("p", "1")
	l.PutStr("p.q", "2")
	assert.True(t, spanHasConflict(inLink, ""))

	assert.Equal(t, []renamedKey{{where: "event", keyRename: keyRename{"x", "x._value"}}}, renameSpanConflicts(inEvent))
	assert.Equal(t, []renamedKey{{where: "link", keyRename: keyRename{"p", "p._value"}}}, renameSpanConflicts(inLink))
	assert.False(t, spanHasConflict(inEvent, ""))
	assert.False(t, spanHasConflict(inLink, ""))
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

	require.NoError(t, exp.ConsumeTraces(t.Context(), td))
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
	require.NoError(t, exp.ConsumeTraces(t.Context(), td))
	assert.Equal(t, int64(10), h.counter(t, metricRenamed))
	again := 0
	for _, e := range h.logged(zapcore.InfoLevel) {
		if strings.HasPrefix(e.Message, "Renamed an attribute key") {
			again++
		}
	}
	assert.Equal(t, 5, again)
}
