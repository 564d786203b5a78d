// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepbusy

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTimelinePlace(t *testing.T) {
	tl := NewTimeline[int](8)
	_, p := tl.Rank(1).Place(50)
	assert.Equal(t, Unknown, p, "nothing known of the rank")

	tl.Rank(1).Add(7, 100, 200)
	it, p := tl.Rank(1).Place(100)
	assert.Equal(t, InStep, p)
	assert.Equal(t, int64(7), it)
	it, p = tl.Rank(1).Place(199)
	assert.Equal(t, InStep, p)
	assert.Equal(t, int64(7), it)
	_, p = tl.Rank(1).Place(200)
	assert.Equal(t, Unknown, p, "a span starting at the step's end is in the next step, not seen yet")
	_, p = tl.Rank(1).Place(250)
	assert.Equal(t, Unknown, p, "after the last step seen: its step may still come")
	_, p = tl.Rank(1).Place(50)
	assert.Equal(t, Outside, p, "before a step, covered by none: a job span")

	tl.Rank(1).Add(8, 300, 400)
	_, p = tl.Rank(1).Place(250)
	assert.Equal(t, Outside, p, "between two steps: a checkpoint")
	_, p = tl.Rank(2).Place(350)
	assert.Equal(t, Unknown, p, "ranks are apart")

	tl.Rank(1).Add(9, 500, 400)
	_, p = tl.Rank(1).Place(450)
	assert.Equal(t, Unknown, p, "a step span ending before it starts is ignored")
}

func TestTimelineRemembersRecentSteps(t *testing.T) {
	tl := NewTimeline[int](8)
	for it := range int64(10) {
		tl.Rank(1).Add(it, it*100, it*100+90)
	}
	it, p := tl.Rank(1).Place(950)
	assert.Equal(t, InStep, p)
	assert.Equal(t, int64(9), it)
	it, p = tl.Rank(1).Place(650)
	assert.Equal(t, InStep, p, "the last four steps are known")
	assert.Equal(t, int64(6), it)
	_, p = tl.Rank(1).Place(550)
	assert.Equal(t, Outside, p, "older steps are forgotten: Outside, not Unknown, so nothing waits for them")
}

func TestTimelineBoundsRanks(t *testing.T) {
	tl := NewTimeline[int](4)
	for r := range 100 {
		tl.Rank(r).Add(1, 0, 10)
	}
	assert.LessOrEqual(t, tl.Len(), 8)
	_, p := tl.Rank(99).Place(5)
	assert.Equal(t, InStep, p, "recent ranks are kept")
}

// A rank looked up once places like the timeline, and is the timeline's.
func TestTimelineRankHandle(t *testing.T) {
	tl := NewTimeline[int](8)
	r := tl.Rank(1)
	_, p := r.Place(50)
	assert.Equal(t, Unknown, p, "a new rank knows no step")
	r.Add(7, 100, 200)
	it, p := tl.Rank(1).Place(150)
	assert.Equal(t, InStep, p, "added through the handle, seen by the timeline")
	assert.Equal(t, int64(7), it)
	assert.Same(t, r, tl.Rank(1), "one rank, one timeline")
	tl.Rank(1).Add(8, 200, 300)
	it, p = r.Place(250)
	assert.Equal(t, InStep, p)
	assert.Equal(t, int64(8), it)
}
