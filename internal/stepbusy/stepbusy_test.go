// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepbusy

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBusy(t *testing.T) {
	cases := []struct {
		name       string
		start, end int64
		waits      []Interval
		want       int64
	}{
		{"no waits: the whole step", 100, 200, nil, 100},
		{"one wait", 0, 100, []Interval{{70, 85}}, 85},
		{"disjoint waits", 0, 100, []Interval{{80, 90}, {10, 20}}, 80},
		{"nested waits count once", 0, 100, []Interval{{50, 90}, {60, 70}}, 60},
		{"overlapping waits count once", 0, 100, []Interval{{50, 70}, {60, 80}, {75, 90}}, 60},
		{"touching waits", 0, 100, []Interval{{50, 60}, {60, 70}}, 80},
		{"clipped to the step", 100, 200, []Interval{{50, 120}, {190, 300}}, 70},
		{"outside the step", 100, 200, []Interval{{0, 50}, {250, 300}}, 100},
		{"wait covers the step", 100, 200, []Interval{{0, 300}}, 0},
		{"reversed wait ignored", 0, 100, []Interval{{60, 40}}, 100},
		{"no usable duration", 200, 100, nil, -1},
		{"zero duration", 100, 100, []Interval{{100, 100}}, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, Busy(c.start, c.end, c.waits))
		})
	}
}

func TestStepTime(t *testing.T) {
	var st StepTime
	assert.Equal(t, int64(-1), st.Busy(), "no step span yet")
	st.AddWait(Interval{Start: 80, End: 90})
	st.AddWait(Interval{Start: 10, End: 20})
	st.Start, st.End = 0, 100
	assert.Equal(t, int64(80), st.Busy(), "waits added before the step span count")
	st.AddWait(Interval{Start: 85, End: 95})
	assert.Equal(t, int64(75), st.Busy(), "a wait added after scoring counts once, overlapping")
	assert.Len(t, st.Waits, 3)
}

func TestScores(t *testing.T) {
	assert.Equal(t, 1.0, RelativeScore(100, 100), "the fastest rank")
	assert.Equal(t, 0.5, RelativeScore(100, 200), "twice as slow")
	assert.Equal(t, 1.0, RelativeScore(0, 200), "fastest unknown")
	assert.Equal(t, 1.0, RelativeScore(100, -1), "busy unknown")
	assert.Equal(t, 0.25, IndividualScore(50, 200))
	assert.Equal(t, 1.0, IndividualScore(300, 200), "faster than ever")
	assert.Equal(t, 0.333, Round3(1.0/3))
}

func TestHistory(t *testing.T) {
	h := NewHistory[int64](3, 100)
	assert.Equal(t, int64(0), h.Add(1, -1), "nothing known")
	assert.Equal(t, 0, h.Len(), "an unknown time does not make a rank")
	assert.Equal(t, int64(100), h.Add(1, 100))
	assert.Equal(t, int64(90), h.Add(1, 90))
	assert.Equal(t, int64(90), h.Add(1, 300))
	assert.Equal(t, int64(90), h.Add(1, 200), "90 is still among the last 3")
	assert.Equal(t, int64(200), h.Add(1, 250), "90 fell out")
	assert.Equal(t, int64(200), h.Add(1, -1), "unknown: best so far")
	assert.Equal(t, int64(50), h.Add(2, 50), "ranks are separate")
}

func TestHistoryForgetsIdleRanks(t *testing.T) {
	h := NewHistory[int](2, 2)
	h.Add(1, 10)
	h.Add(2, 20)
	h.Add(3, 30) // the first generation (1, 2) retires
	assert.Equal(t, int64(10), h.Add(1, 40), "rank 1 comes back from the previous generation")
	h.Add(4, 50) // (3, 1) retire, rank 2 is forgotten
	h.Add(5, 60)
	assert.LessOrEqual(t, h.Len(), 4)
	assert.Equal(t, int64(70), h.Add(2, 70), "rank 2 starts over")
}

func TestSelect(t *testing.T) {
	th := Thresholds{Relative: 0.7, Individual: 0.7, MaxRanks: 2}
	scores := []Score{
		{Rank: 0, Busy: 100},
		{Rank: 1, Busy: 300},
		{Rank: 2, Busy: 110},
		{Rank: 3, Busy: 150},
		{Rank: 4, Busy: 200},
		{Rank: 5, Busy: -1},
	}
	best := map[int64]int64{0: 100, 1: 100, 2: 50, 3: 150, 4: 200}
	for i := range scores {
		s := &scores[i]
		s.Relative, s.Individual = RelativeScore(100, s.Busy), IndividualScore(best[s.Rank], s.Busy)
	}
	byRank := map[int64]Score{}
	for _, s := range scores {
		byRank[s.Rank] = s
	}
	assert.InDelta(t, 1.0/3, byRank[1].Relative, 1e-9)
	assert.InDelta(t, 1.0/3, byRank[1].Individual, 1e-9)
	assert.InDelta(t, 100.0/110, byRank[2].Relative, 1e-9)
	assert.InDelta(t, 50.0/110, byRank[2].Individual, 1e-9, "slow against its own past only")
	assert.Equal(t, 0.5, byRank[4].Relative)
	assert.Equal(t, 1.0, byRank[4].Individual)
	assert.False(t, th.Straggles(byRank[5]), "unknown busy time is never a straggler")
	assert.True(t, th.Straggles(byRank[3]), "0.667 relative is below 0.7")

	picked := th.Select(scores)
	ranks := make([]int64, len(picked))
	for i, s := range picked {
		ranks[i] = s.Rank
	}
	assert.Equal(t, []int64{1, 2}, ranks, "worst first (0.333, 0.455, then 0.5 and 0.667 cut)")

	th.MaxRanks = 10
	picked = th.Select(scores)
	ranks = ranks[:0]
	for _, s := range picked {
		ranks = append(ranks, s.Rank)
	}
	assert.Equal(t, []int64{1, 2, 4, 3}, ranks)

	th.Relative, th.Individual = 0, 0
	assert.Empty(t, th.Select(scores), "thresholds of 0 switch the scores off")
}
