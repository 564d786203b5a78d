package weaveexporter

import (
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// FuzzRenameConflicts: for any set of attribute keys (one per line of the
// input), the rename leaves no key that is a dotted prefix of another (what
// Weave rejects), keeps every value, and is deterministic.
func FuzzRenameConflicts(f *testing.F) {
	for _, s := range []string{
		"slurm.job.id\nslurm.job.id.raw",
		"a\na.b\na.b.c",
		"a\na.b\na._value",
		"a\na._value\na._value2\na.b",
		"nemo.run.id\nnemo.run.id.source",
		".\n..\na.\na..b",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input string) {
		build := func() pcommon.Map {
			m := pcommon.NewMap()
			for i, k := range strings.Split(input, "\n") {
				m.PutInt(k, int64(i))
			}
			return m
		}
		m := build()
		values := map[int64]bool{}
		for _, v := range m.All() {
			values[v.Int()] = true
		}
		renameConflicts(m)

		keys := make([]string, 0, m.Len())
		for k, v := range m.All() {
			keys = append(keys, k)
			if !values[v.Int()] {
				t.Fatalf("value %d appeared from nowhere", v.Int())
			}
			delete(values, v.Int())
		}
		if len(values) != 0 {
			t.Fatalf("values lost by the rename: %v (keys now %q)", values, keys)
		}
		if keysConflict(keys) {
			t.Fatalf("keys still conflict after the rename: %q", keys)
		}
		again := build()
		renameConflicts(again)
		if again.Len() != m.Len() {
			t.Fatalf("rename is not deterministic")
		}
		for k, v := range m.All() {
			if w, ok := again.Get(k); !ok || w.Int() != v.Int() {
				t.Fatalf("rename is not deterministic at %q", k)
			}
		}
	})
}
