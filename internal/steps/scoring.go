// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package steps // import "github.com/nemo-lens/otelcol-nemo/internal/steps"

import (
	"cmp"
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
)

// maxPresizedRanks bounds the ranks an open step makes room for at once
// from the world size its first rank reports: a world larger than that (or
// a payload claiming one) grows the step as its ranks come.
const maxPresizedRanks = 4096

// openStep is a step whose ranks are still reporting.
type openStep[D any] struct {
	ranks []RankStep
	index map[int64]int32 // rank -> its entry in ranks
	// waits counts the wait intervals recorded.
	waits int
	// prior is the step's first decision, when a rank's step span came
	// after it and reopened the step.
	prior *decidedStep[D]
}

// reported counts the ranks that reported the step, its first decision's
// included.
func (o *openStep[D]) reported() int64 {
	n := int64(len(o.ranks))
	if o.prior != nil {
		n += o.prior.reported
	}
	return n
}

// decidedStep is what a decided step leaves for the ranks and spans that
// come after its decision; end is its ranks' latest step span end.
type decidedStep[D any] struct {
	fastest, reported, end int64
	value                  D
}

// report records a rank's step span [iv) in its open step, which it opens:
// the step is complete once every rank of its world reported, and decided
// at the next tick. A rank reporting after the step's decision reopens it
// until the next tick, so that its wait spans, which arrive with it, count
// in its busy time; the ranks decided before keep their decision. A step
// span that starts after the decided step's ranks ended is the iteration
// done again (the run restarted from a checkpoint): a new step.
// It reports whether the rank's step span was recorded (false: the rank
// had reported the step already).
func (e *Engine[D]) report(key Step, rank, worldSize int64, s ptrace.Span, iv stepbusy.Interval, now time.Duration) bool {
	o := e.open.Get(key)
	if o == nil {
		prior, _ := e.decided.Get(key)
		if prior != nil && iv.Start >= prior.end {
			// Not a late rank (its step would overlap the others'): the
			// iteration again, after the run restarted from a checkpoint.
			prior = nil
		}
		n := min(max(worldSize, 0), maxPresizedRanks) // a new step: room for the world the rank reports
		if prior != nil {
			n = 0 // reopened for late ranks, a few
		}
		o = e.open.Open(key, now, openStep[D]{ranks: make([]RankStep, 0, n), index: make(map[int64]int32, n), prior: prior})
		if prior != nil {
			e.open.MarkComplete(o)
		}
	}
	v := &o.Value
	if _, dup := v.index[rank]; dup {
		return false // the first step span of a rank counts
	}
	v.index[rank] = int32(len(v.ranks))
	v.ranks = append(v.ranks, RankStep{
		StepTime: stepbusy.StepTime{Start: iv.Start, End: iv.End}, Score: stepbusy.Score{Rank: rank},
		TraceID: s.TraceID(), SpanID: s.SpanID(),
	})
	e.counts.OpenRankSteps++
	e.stats.OpenRankSteps++
	e.open.Report(o, worldSize, v.reported())
	return true
}

// addWait adds a wait interval to its rank's step, if still open.
func (e *Engine[D]) addWait(key Step, rank int64, iv stepbusy.Interval) {
	if iv.End < iv.Start {
		e.stats.Skipped[SkipInvalidDuration]++
		return
	}
	o := e.open.Get(key)
	if o == nil {
		e.stats.Skipped[SkipLateWait]++
		return
	}
	i, ok := o.Value.index[rank]
	if !ok {
		e.stats.Skipped[SkipLateWait]++
		return
	}
	o.Value.ranks[i].AddWait(iv)
	o.Value.waits++
	e.counts.Waits++
}

// placement is where a span of the step key is, as its user sees it.
func (e *Engine[D]) placement(key Step, kind Kind) Placement[D] {
	p := Placement[D]{Kind: kind}
	if kind == KindOutside {
		return p
	}
	p.Iteration = key.Iteration
	if !e.cfg.Scores {
		return p
	}
	if o := e.open.Get(key); o != nil {
		p.Open = true
		if prior := o.Value.prior; prior != nil {
			p.Decided = &prior.value
		}
	} else if d, ok := e.decided.Get(key); ok {
		p.Decided = &d.value
	}
	return p
}

// decide scores every rank that reported the step on its busy time (the
// step span minus its waits) against the step's fastest, its first
// decision's ranks included, and against its own recent steps, and tells
// the user.
func (e *Engine[D]) decide(o *Open[Step, openStep[D]], cause Cause) {
	v := &o.Value
	e.counts.OpenRankSteps -= len(v.ranks)
	e.stats.OpenRankSteps -= int64(len(v.ranks))
	e.counts.Waits -= v.waits
	ranks := v.ranks
	slices.SortFunc(ranks, func(a, b RankStep) int { return cmp.Compare(a.Score.Rank, b.Score.Rank) })
	var fastest, end int64
	for i := range ranks {
		end = max(end, ranks[i].End)
		busy := ranks[i].Busy()
		ranks[i].Score.Busy = busy
		if busy > 0 && (fastest == 0 || busy < fastest) {
			fastest = busy
		}
	}
	if p := v.prior; p != nil && p.fastest > 0 && (fastest == 0 || p.fastest < fastest) {
		fastest = p.fastest
	}
	for i := range ranks {
		s := &ranks[i].Score
		s.Relative = stepbusy.RelativeScore(fastest, s.Busy)
		s.Individual = stepbusy.IndividualScore(e.history.Add(Rank{Group: o.Key.Group, Rank: s.Rank}, s.Busy), s.Busy)
	}
	reported := v.reported()
	entry := v.prior
	if entry == nil {
		entry = &decidedStep[D]{}
		e.decided.Put(o.Key, entry)
		e.stats.Decided[cause]++
		if cause == AtWait && o.WorldSize > reported {
			e.stats.RanksMissing += o.WorldSize - reported
		}
	}
	entry.fastest, entry.reported, entry.end = fastest, reported, max(entry.end, end)
	d := Decision[D]{
		Step: o.Key, Cause: cause, Ranks: ranks, Reopened: v.prior != nil,
		Reported: reported, WorldSize: o.WorldSize, Fastest: fastest, Value: &entry.value,
	}
	e.l.Decided(&d)
	v.ranks, v.index = nil, nil
}
