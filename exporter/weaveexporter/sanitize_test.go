package weaveexporter

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
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
