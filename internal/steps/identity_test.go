// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package steps

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
)

func TestReader(t *testing.T) {
	k := DefaultKeys()
	r := NewReader(k.RankKeys, k.WorldSizeKeys, k.GroupKeys)
	attrs := func(kv map[string]any) pcommon.Map {
		m := pcommon.NewMap()
		_ = m.FromRaw(kv)
		return m
	}
	a := attrs(map[string]any{"nemo.run.id": "r1", "dl.rank": "3", "nv.dl.world_size": 8})
	id, status := r.Read(a)
	assert.Equal(t, rankattr.Valid, status)
	assert.Equal(t, int64(3), id.Rank.Rank)
	assert.Equal(t, int64(8), id.WorldSize)

	same, _ := r.Read(attrs(map[string]any{"nemo.run.id": "r1", "nv.dl.rank": 5}))
	assert.Equal(t, id.Group, same.Group, "one run, one group")
	assert.Equal(t, int64(0), same.WorldSize, "no world size")
	other, _ := r.Read(attrs(map[string]any{"nemo.run.id": "r2", "nv.dl.rank": 3}))
	assert.NotEqual(t, id.Group, other.Group, "rank numbers are only unique within a run")
	assert.Equal(t, Step{Group: id.Group, Iteration: 4}, id.StepOf(4))

	_, status = r.Read(attrs(map[string]any{"nemo.run.id": "r1"}))
	assert.Equal(t, rankattr.Missing, status)
	_, status = r.Read(attrs(map[string]any{"dl.rank": "three"}))
	assert.Equal(t, rankattr.Invalid, status)
}

func TestGroupTreatsIntAndStringAlike(t *testing.T) {
	k := DefaultKeys()
	r := NewReader(k.RankKeys, k.WorldSizeKeys, k.GroupKeys)
	a, b := pcommon.NewMap(), pcommon.NewMap()
	a.PutInt("nemo.run.id", 42)
	b.PutStr("nemo.run.id", "42")
	assert.Equal(t, r.Group(a), r.Group(b))
	b.PutStr("rl.worker_group", "42")
	assert.NotEqual(t, r.Group(a), r.Group(b), "a group key present is not the same as absent")
}
