package stepsamplingprocessor

import (
	"hash/maphash"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

func TestIdentify(t *testing.T) {
	r := rankReader{runIDKey: "nemo.run.id", rankKeys: []string{"nv.dl.rank", "dl.rank"}, groupKeys: []string{"nemo.run.id", "rl.worker_group"}, seed: maphash.MakeSeed()}
	attrs := func(edit func(pcommon.Map)) pcommon.Map {
		m := pcommon.NewMap()
		edit(m)
		return m
	}
	intRun := r.identify(attrs(func(m pcommon.Map) { m.PutInt("nemo.run.id", 4242); m.PutInt("nv.dl.rank", 3) }))
	strRun := r.identify(attrs(func(m pcommon.Map) { m.PutStr("nemo.run.id", "4242"); m.PutStr("dl.rank", "3") }))
	assert.True(t, intRun.ok)
	assert.Equal(t, "4242", intRun.runID, "an int run id is hashed in decimal")
	assert.Equal(t, strRun, intRun, "int and string spellings are the same process")

	other := r.identify(attrs(func(m pcommon.Map) {
		m.PutStr("nemo.run.id", "4242")
		m.PutStr("dl.rank", "3")
		m.PutStr("rl.worker_group", "policy")
	}))
	assert.NotEqual(t, strRun.key, other.key, "ranks are numbered within a worker group")
	assert.Equal(t, strRun.key.rank, other.key.rank)

	assert.False(t, r.identify(attrs(func(m pcommon.Map) { m.PutStr("nemo.run.id", "x") })).ok, "no rank")
	assert.False(t, r.identify(attrs(func(m pcommon.Map) { m.PutStr("dl.rank", "three") })).ok, "not a rank")
	noRun := r.identify(attrs(func(m pcommon.Map) { m.PutInt("dl.rank", 1) }))
	assert.True(t, noRun.ok)
	assert.Empty(t, noRun.runID)
}
