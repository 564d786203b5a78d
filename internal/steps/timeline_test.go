// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package steps

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRankStepsPlace(t *testing.T) {
	var r, other RankSteps
	_, p := r.Place(50)
	assert.Equal(t, Unknown, p, "nothing known of the rank")

	r.Add(7, 100, 200)
	it, p := r.Place(100)
	assert.Equal(t, InStep, p)
	assert.Equal(t, int64(7), it)
	it, p = r.Place(199)
	assert.Equal(t, InStep, p)
	assert.Equal(t, int64(7), it)
	_, p = r.Place(200)
	assert.Equal(t, Unknown, p, "a span starting at the step's end is in the next step, not seen yet")
	_, p = r.Place(250)
	assert.Equal(t, Unknown, p, "after the last step seen: its step may still come")
	_, p = r.Place(50)
	assert.Equal(t, Outside, p, "before a step, covered by none: a job span")
	assert.True(t, r.Seen(7, 100, 200))
	assert.False(t, r.Seen(8, 100, 200))

	r.Add(8, 300, 400)
	_, p = r.Place(250)
	assert.Equal(t, Outside, p, "between two steps: a checkpoint")
	_, p = other.Place(350)
	assert.Equal(t, Unknown, p, "ranks are apart")

	r.Add(9, 500, 400)
	_, p = r.Place(450)
	assert.Equal(t, Unknown, p, "a step span ending before it starts is ignored")
}

func TestRankStepsRemembersRecentSteps(t *testing.T) {
	var r RankSteps
	for it := range int64(10) {
		r.Add(it, it*100, it*100+90)
	}
	it, p := r.Place(950)
	assert.Equal(t, InStep, p)
	assert.Equal(t, int64(9), it)
	it, p = r.Place(650)
	assert.Equal(t, InStep, p, "the last four steps are known")
	assert.Equal(t, int64(6), it)
	_, p = r.Place(550)
	assert.Equal(t, Outside, p, "older steps are forgotten: Outside, not Unknown, so nothing waits for them")
}
