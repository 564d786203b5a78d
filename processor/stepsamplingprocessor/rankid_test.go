// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepsamplingprocessor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

func TestIdentify(t *testing.T) {
	r := newRankReader("nemo.run.id", []string{"nv.dl.rank", "dl.rank"}, []string{"nemo.run.id", "rl.worker_group"})
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
	assert.Equal(t, strRun.key.Rank, other.key.Rank)

	assert.False(t, r.identify(attrs(func(m pcommon.Map) { m.PutStr("nemo.run.id", "x") })).ok, "no rank")
	assert.False(t, r.identify(attrs(func(m pcommon.Map) { m.PutStr("dl.rank", "three") })).ok, "not a rank")
	noRun := r.identify(attrs(func(m pcommon.Map) { m.PutInt("dl.rank", 1) }))
	assert.True(t, noRun.ok)
	assert.Empty(t, noRun.runID)

	bySlurm := newRankReader("slurm.job.id", []string{"dl.rank"}, nil)
	a := bySlurm.identify(attrs(func(m pcommon.Map) { m.PutStr("slurm.job.id", "1"); m.PutInt("dl.rank", 1) }))
	b := bySlurm.identify(attrs(func(m pcommon.Map) { m.PutStr("slurm.job.id", "2"); m.PutInt("dl.rank", 1) }))
	assert.NotEqual(t, a.key, b.key, "the run id tells processes apart even when group_keys does not list it")
}
