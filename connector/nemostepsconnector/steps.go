// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsconnector // import "github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector"

import (
	"cmp"
	"slices"
	"time"

	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// openStep is one (run, group, iteration) whose ranks are still reporting,
// in the table of open steps.
type openStep = steps.Open[steps.Step, stepRanks]

// stepRanks are the rank steps of an open step.
type stepRanks struct {
	ranks []rankStep
	index map[int64]int32 // rank -> its entry in ranks
	// prior is what the step's first decision saw, when a late rank's step
	// span reopened it: the late ranks are scored against its fastest rank.
	prior *decidedStep
}

// rankStep is one rank's step span and the wait intervals tied to it.
type rankStep struct {
	rank int64
	stepbusy.StepTime
	labels *rankLabels
}

// reported counts the ranks that reported the step, its first decision's
// included.
func (sr *stepRanks) reported() int64 {
	n := int64(len(sr.ranks))
	if sr.prior != nil {
		n += sr.prior.reported
	}
	return n
}

// stepFor is the open step of key, opened (or reopened after a decision)
// when there is none.
func (c *stepsConnector) stepFor(key steps.Step, now time.Duration) *openStep {
	if st := c.open.Get(key); st != nil {
		return st
	}
	prior, _ := c.decided.Get(key)
	return c.open.Open(key, now, stepRanks{index: make(map[int64]int32), prior: prior})
}

// enforceBudget decides the oldest open steps early while more rank steps
// are open than max_open_rank_steps allows.
func (c *stepsConnector) enforceBudget(t *tally) {
	for c.openRankSteps > c.maxOpen {
		if !c.open.DecideOldest(c.decider(t)) {
			return
		}
	}
}

// decider decides the steps the table hands out, counting into t.
func (c *stepsConnector) decider(t *tally) func(*openStep, steps.Cause) {
	return func(st *openStep, cause steps.Cause) { c.decide(st, cause, t) }
}

// decide scores every rank that reported the step on its busy time, as
// rank_strategy's straggler retention does, emits (or aggregates) the
// ranks' data points and counts the stragglers of the run.
func (c *stepsConnector) decide(st *openStep, cause steps.Cause, t *tally) {
	sr := &st.Value
	c.openRankSteps -= len(sr.ranks)
	t.openRankSteps -= int64(len(sr.ranks))
	if len(sr.ranks) == 0 {
		return
	}
	// Ranks in order, so that the output is in a stable order.
	slices.SortFunc(sr.ranks, func(a, b rankStep) int { return cmp.Compare(a.rank, b.rank) })
	scores := c.scores[:0]
	for i := range sr.ranks {
		r := &sr.ranks[i]
		// Score.Rank holds the entry's index: it is only an identifier here.
		scores = append(scores, stepbusy.Score{Rank: int64(i), Busy: r.Busy()})
	}
	fastest := stepbusy.Fastest(scores)
	if p := sr.prior; p != nil && p.fastest > 0 && (fastest == 0 || p.fastest < fastest) {
		fastest = p.fastest
	}
	stepbusy.Rate(scores, fastest, func(s stepbusy.Score) int64 {
		return c.history.Add(steps.Rank{Group: st.Key.Group, Rank: sr.ranks[s.Rank].rank}, s.Busy)
	})
	var stragglers, lastEnd int64
	for _, s := range scores {
		r := &sr.ranks[s.Rank]
		if c.thresholds.Straggles(s) {
			stragglers++
		}
		c.observe(steps.Rank{Group: st.Key.Group, Rank: r.rank}, r, s)
		lastEnd = max(lastEnd, r.End)
	}
	c.scores = scores[:0]
	c.countStragglers(st.Key.Group, sr.ranks[0].labels, stragglers, sr.ranks[0].Start, lastEnd)

	reported := sr.reported()
	if sr.prior == nil {
		// A reopened step was counted when it was first decided.
		t.decided[cause]++
		if cause == steps.AtWait && st.WorldSize > reported {
			t.ranksMissing += st.WorldSize - reported
		}
		c.decided.Put(st.Key, &decidedStep{fastest: fastest, reported: reported})
	} else {
		sr.prior.fastest, sr.prior.reported = fastest, reported
	}
	sr.ranks, sr.index = nil, nil
}

// decidedStep is what a decided step leaves behind for its late ranks.
type decidedStep struct {
	fastest  int64
	reported int64
}
