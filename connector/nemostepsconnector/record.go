// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsconnector // import "github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector"

import (
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/stall"
	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// maxPendingPerRank bounds the wait intervals of one rank waiting for their
// step span. A step has a few wait spans (Megatron-LM: the gradient sync,
// and a receive per microbatch with pipeline parallelism), and they wait at
// most until their step span, which ends right after them.
const maxPendingPerRank = 256

// rankState is what is known of a rank between its batches.
type rankState struct {
	labels *rankLabels
	// pending are wait intervals no step span seen so far places.
	pending steps.Waiting[stepbusy.Interval]
}

// resourceRank is the rank of the resource being read, identified at its
// first step or wait span: resources without any pay nothing.
type resourceRank struct {
	identified bool
	reason     skipReason
	steps.Identity
	attrs pcommon.Map
	state *rankState
	// timeline is the rank's step spans in the placer, looked up once.
	timeline *stepbusy.RankSteps
	// tracker is the rank in the stall detector, looked up at its first
	// span the detector reads.
	tracked bool
	tracker stall.Tracker
}

// recordResource notes the step and wait spans of one resource; every other
// span costs a name check.
func (c *stepsConnector) recordResource(rs ptrace.ResourceSpans, now time.Duration, t *tally) {
	r := resourceRank{attrs: rs.Resource().Attributes()}
	// The stall detector reads the job spans and every Megatron span's
	// place in the step; without it, only step and wait spans are read.
	progress := c.stalls != nil
	sss := rs.ScopeSpans()
	for i := 0; i < sss.Len(); i++ {
		spans := sss.At(i).Spans()
		for j := 0; j < spans.Len(); j++ {
			s := spans.At(j)
			name := s.Name()
			isStep := c.spans.IsStep(name)
			isWait := !isStep && c.spans.IsWait(name)
			isJob := progress && slices.Contains(c.jobSpans, name)
			if !isStep && !isWait && !isJob && (!progress || !strings.HasPrefix(name, "megatron.")) {
				continue
			}
			if !r.identified {
				r.identified = true
				r.Identity, r.reason = c.id.rankOf(r.attrs)
			}
			if r.reason != skipNone {
				if isStep || isWait {
					t.skipped[r.reason]++
				}
				continue
			}
			var step stepOf
			switch {
			case isStep:
				step.is = true
				step.iteration, step.ok = c.spans.Iteration(s)
				c.recordStep(&r, s, step, now, t)
			case isWait:
				c.recordWait(&r, s, now, t)
			}
			if progress {
				c.recordProgress(&r, s, name, step, isJob)
			}
		}
	}
}

// timelineOf is the resource's rank's timeline in the placer.
func (c *stepsConnector) timelineOf(r *resourceRank) *stepbusy.RankSteps {
	if r.timeline == nil {
		r.timeline = c.placer.Rank(r.Rank)
	}
	return r.timeline
}

// stateOf is the resource's rank state, created when new.
func (c *stepsConnector) stateOf(r *resourceRank) *rankState {
	if r.state == nil {
		st, ok := c.ranks.Get(r.Rank)
		if !ok {
			st = &rankState{}
			c.ranks.Put(r.Rank, st)
		}
		r.state = st
	}
	return r.state
}

// stepOf is what a span says of its step: whether it is a step span (is)
// and, when it is, its iteration (ok: it has a usable one). Read once per
// step span, for the step metrics and the stall detector.
type stepOf struct {
	is, ok    bool
	iteration int64
}

func (c *stepsConnector) recordStep(r *resourceRank, s ptrace.Span, step stepOf, now time.Duration, t *tally) {
	if !step.ok {
		t.skipped[skipMissingIteration]++
		return
	}
	iteration := step.iteration
	start, end := int64(s.StartTimestamp()), int64(s.EndTimestamp())
	if end <= start {
		t.skipped[skipInvalidDuration]++
		return
	}
	// Seen even if its step was decided since: a batch sent twice.
	tl := c.timelineOf(r)
	if tl.Seen(iteration, start, end) {
		return
	}
	st := c.stepFor(r.StepOf(iteration), now)
	sr := &st.Value
	if _, dup := sr.index[r.Rank.Rank]; dup {
		return
	}
	state := c.stateOf(r)
	state.labels = c.id.labelsFor(state.labels, r.attrs, r.Rank.Rank)
	sr.index[r.Rank.Rank] = int32(len(sr.ranks))
	sr.ranks = append(sr.ranks, rankStep{rank: r.Rank.Rank, StepTime: stepbusy.StepTime{Start: start, End: end}, labels: state.labels})
	c.openRankSteps++
	t.openRankSteps++
	c.open.Report(st, r.WorldSize, sr.reported())
	tl.Add(iteration, start, end)
	if state.pending.Len() > 0 {
		placed, expired := steps.Resolve(tl, &state.pending, now-c.spanWait, c.placed[:0])
		t.skipped[skipPendingExpired] += int64(expired)
		for _, p := range placed {
			if p.Where == stepbusy.InStep {
				c.attachWait(r.StepOf(p.Iteration), r.Rank.Rank, p.Item, t)
			}
		}
		c.placed = placed[:0]
	}
}

func (c *stepsConnector) recordWait(r *resourceRank, s ptrace.Span, now time.Duration, t *tally) {
	iv := stepbusy.Interval{Start: int64(s.StartTimestamp()), End: int64(s.EndTimestamp())}
	if iv.End < iv.Start {
		t.skipped[skipInvalidDuration]++
		return
	}
	it, place := c.timelineOf(r).Place(iv.Start)
	switch place {
	case stepbusy.InStep:
		c.attachWait(r.StepOf(it), r.Rank.Rank, iv, t)
	case stepbusy.Unknown:
		t.skipped[skipPendingExpired] += int64(c.stateOf(r).pending.Add(iv, iv.Start, now, now-c.spanWait, maxPendingPerRank))
	}
	// Outside: a wait outside every step (evaluation, checkpoint) is no
	// step's business.
}

// attachWait adds a wait interval to its rank's step, if still open.
func (c *stepsConnector) attachWait(key steps.Step, rank int64, iv stepbusy.Interval, t *tally) {
	st := c.open.Get(key)
	if st == nil {
		t.skipped[skipLateWait]++
		return
	}
	i, ok := st.Value.index[rank]
	if !ok {
		t.skipped[skipLateWait]++
		return
	}
	st.Value.ranks[i].AddWait(iv)
}
