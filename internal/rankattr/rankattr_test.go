// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankattr

import (
	"hash/maphash"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

func TestLookup(t *testing.T) {
	tests := []struct {
		name    string
		set     func(m pcommon.Map)
		want    int64
		wantKey string
		status  Status
	}{
		{"missing", func(pcommon.Map) {}, 0, "", Missing},
		{"int newer spelling", func(m pcommon.Map) { m.PutInt("nv.dl.rank", 3) }, 3, "nv.dl.rank", Valid},
		{"int older spelling", func(m pcommon.Map) { m.PutInt("dl.rank", 7) }, 7, "dl.rank", Valid},
		{"string rank", func(m pcommon.Map) { m.PutStr("dl.rank", "12") }, 12, "dl.rank", Valid},
		{"string rank with spaces", func(m pcommon.Map) { m.PutStr("dl.rank", " 5 ") }, 5, "dl.rank", Valid},
		{"newer spelling wins", func(m pcommon.Map) { m.PutInt("dl.rank", 1); m.PutStr("nv.dl.rank", "2") }, 2, "nv.dl.rank", Valid},
		{"garbage string", func(m pcommon.Map) { m.PutStr("nv.dl.rank", "three") }, 0, "nv.dl.rank", Invalid},
		{"empty string", func(m pcommon.Map) { m.PutStr("nv.dl.rank", "") }, 0, "nv.dl.rank", Invalid},
		{"negative int", func(m pcommon.Map) { m.PutInt("dl.rank", -1) }, 0, "dl.rank", Invalid},
		{"negative string", func(m pcommon.Map) { m.PutStr("dl.rank", "-4") }, 0, "dl.rank", Invalid},
		{"float", func(m pcommon.Map) { m.PutDouble("dl.rank", 1.5) }, 0, "dl.rank", Invalid},
		{"bool", func(m pcommon.Map) { m.PutBool("dl.rank", true) }, 0, "dl.rank", Invalid},
		{"overflow", func(m pcommon.Map) { m.PutStr("dl.rank", "99999999999999999999") }, 0, "dl.rank", Invalid},
		{"garbage in first key is not skipped", func(m pcommon.Map) { m.PutStr("nv.dl.rank", "x"); m.PutInt("dl.rank", 1) }, 0, "nv.dl.rank", Invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := pcommon.NewMap()
			tt.set(m)
			got, key, status := Lookup(m, DefaultRankKeys)
			assert.Equal(t, tt.status, status)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantKey, key)
		})
	}
}

func TestLookupDoesNotAllocate(t *testing.T) {
	m := pcommon.NewMap()
	m.PutStr("dl.rank", "42")
	allocs := testing.AllocsPerRun(100, func() { Lookup(m, DefaultRankKeys) })
	assert.Zero(t, allocs)
}

func FuzzParseString(f *testing.F) {
	for _, s := range []string{"0", "3", " 17 ", "-1", "+2", "x", "", "1e3", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := ParseString(s)
		if ok && n < 0 {
			t.Fatalf("ParseString(%q) = %d, valid but negative", s, n)
		}
		if !ok && n != 0 {
			t.Fatalf("ParseString(%q) = %d, invalid but non-zero", s, n)
		}
	})
}

func TestHashGroup(t *testing.T) {
	seed := maphash.MakeSeed()
	hash := func(edit func(pcommon.Map)) uint64 {
		m := pcommon.NewMap()
		edit(m)
		var h maphash.Hash
		h.SetSeed(seed)
		HashGroup(&h, m, DefaultGroupKeys)
		return h.Sum64()
	}
	intRun := hash(func(m pcommon.Map) { m.PutInt("nemo.run.id", 4242) })
	assert.Equal(t, intRun, hash(func(m pcommon.Map) { m.PutStr("nemo.run.id", "4242") }), "an int run id and its decimal string are one run")
	assert.NotEqual(t, intRun, hash(func(m pcommon.Map) { m.PutStr("nemo.run.id", "4243") }))
	assert.NotEqual(t, hash(func(m pcommon.Map) { m.PutStr("nemo.run.id", "a") }),
		hash(func(m pcommon.Map) { m.PutStr("nemo.run.id", "a"); m.PutStr("rl.worker_group", "policy") }), "the group tells ranks apart")
	assert.NotEqual(t, hash(func(m pcommon.Map) { m.PutStr("nemo.run.id", "") }), hash(func(pcommon.Map) {}), "an empty run id is not a missing one")
	assert.Equal(t, "4242", GroupValue(pcommon.NewValueInt(4242), nil))
	assert.Equal(t, "true", GroupValue(pcommon.NewValueBool(true), nil))
	m := pcommon.NewMap()
	m.PutInt("nemo.run.id", 4242)
	m.PutStr("rl.worker_group", "policy")
	var h maphash.Hash
	h.SetSeed(seed)
	assert.Zero(t, testing.AllocsPerRun(100, func() { HashGroup(&h, m, DefaultGroupKeys) }), "keying a resource must not allocate")
}
