package nemostepsconnector // import "github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector"

import (
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
)

// maxPendingPerRank bounds the wait intervals of one rank waiting for their
// step span. A step has a few wait spans (Megatron-LM: the gradient sync,
// and a receive per microbatch with pipeline parallelism), and they wait at
// most until their step span, which ends right after them.
const maxPendingPerRank = 256

// rankState is what is known of a rank between its batches.
type rankState struct {
	labels *rankLabels
	// pending are wait intervals no step span seen so far covers: their
	// step span, which ends after them, has not arrived yet.
	pending []pendingWait
}

type pendingWait struct {
	iv      stepbusy.Interval
	arrived time.Duration
}

// resourceRank is the rank of the resource being read, identified at its
// first step or wait span: resources without any pay nothing.
type resourceRank struct {
	identified bool
	reason     skipReason
	key        rankKey
	worldSize  int64
	attrs      pcommon.Map
	state      *rankState
}

// recordResource notes the step and wait spans of one resource; every other
// span costs a name check.
func (c *stepsConnector) recordResource(rs ptrace.ResourceSpans, now time.Duration, t *tally) {
	r := resourceRank{attrs: rs.Resource().Attributes()}
	sss := rs.ScopeSpans()
	for i := 0; i < sss.Len(); i++ {
		spans := sss.At(i).Spans()
		for j := 0; j < spans.Len(); j++ {
			s := spans.At(j)
			name := s.Name()
			isStep := slices.Contains(c.stepNames, name)
			if !isStep && !c.waits.Match(name) {
				continue
			}
			if !r.identified {
				r.identified = true
				r.key, _, r.worldSize, r.reason = c.id.rankOf(r.attrs)
			}
			if r.reason != skipNone {
				t.skipped[r.reason]++
				continue
			}
			if isStep {
				c.recordStep(&r, s, now, t)
			} else {
				c.recordWait(&r, s, now, t)
			}
		}
	}
}

// stateOf is the resource's rank state, created when new.
func (c *stepsConnector) stateOf(r *resourceRank) *rankState {
	if r.state == nil {
		st, ok := c.ranks.get(r.key)
		if !ok {
			st = &rankState{}
			c.ranks.put(r.key, st)
		}
		r.state = st
	}
	return r.state
}

func (c *stepsConnector) recordStep(r *resourceRank, s ptrace.Span, now time.Duration, t *tally) {
	iteration, ok := c.iteration(s)
	if !ok {
		t.skipped[skipMissingIteration]++
		return
	}
	start, end := int64(s.StartTimestamp()), int64(s.EndTimestamp())
	if end <= start {
		t.skipped[skipInvalidDuration]++
		return
	}
	// A rank's steps do not overlap, so only this very step span covers
	// its own middle: when a known step does, it was seen already (a batch
	// sent twice), even if its step was decided since.
	if it, place := c.timeline.Place(r.key, start+(end-start)/2); place == stepbusy.InStep && it == iteration {
		return
	}
	st := c.stepFor(stepKey{group: r.key.group, iteration: iteration}, now)
	if _, dup := st.index[r.key.rank]; dup {
		return
	}
	state := c.stateOf(r)
	state.labels = c.id.labelsFor(state.labels, r.attrs, r.key.rank)
	st.index[r.key.rank] = int32(len(st.ranks))
	st.ranks = append(st.ranks, rankStep{rank: r.key.rank, start: start, end: end, labels: state.labels})
	c.openRankSteps++
	t.openRankSteps++
	st.worldSize = max(st.worldSize, r.worldSize)
	if st.worldSize > 0 && st.reported() >= st.worldSize {
		c.markComplete(st)
	}
	c.timeline.Add(r.key, iteration, start, end)
	if len(state.pending) > 0 {
		c.resolvePending(r.key, state, now, t)
	}
}

func (c *stepsConnector) iteration(s ptrace.Span) (int64, bool) {
	v, ok := s.Attributes().Get(c.iterKey)
	if !ok {
		return 0, false
	}
	return rankattr.Parse(v)
}

func (c *stepsConnector) recordWait(r *resourceRank, s ptrace.Span, now time.Duration, t *tally) {
	iv := stepbusy.Interval{Start: int64(s.StartTimestamp()), End: int64(s.EndTimestamp())}
	if iv.End < iv.Start {
		t.skipped[skipInvalidDuration]++
		return
	}
	it, place := c.timeline.Place(r.key, iv.Start)
	switch place {
	case stepbusy.InStep:
		c.attachWait(stepKey{group: r.key.group, iteration: it}, r.key.rank, iv, t)
	case stepbusy.Unknown:
		c.stateOf(r).addPending(pendingWait{iv: iv, arrived: now}, now-c.wait, t)
	}
	// Outside: a wait outside every step (evaluation, checkpoint) is no
	// step's business.
}

// attachWait adds a wait interval to its rank's step, if still open.
func (c *stepsConnector) attachWait(key stepKey, rank int64, iv stepbusy.Interval, t *tally) {
	st := c.open[key]
	if st == nil {
		t.skipped[skipLateWait]++
		return
	}
	i, ok := st.index[rank]
	if !ok {
		t.skipped[skipLateWait]++
		return
	}
	r := &st.ranks[i]
	if r.waits == nil {
		r.waits = make([]stepbusy.Interval, 0, 4)
	}
	r.waits = append(r.waits, iv)
}

// addPending keeps a wait interval for its step span, forgetting the ones
// that arrived before expiredBefore or, over maxPendingPerRank, the oldest.
func (st *rankState) addPending(p pendingWait, expiredBefore time.Duration, t *tally) {
	drop := 0
	for drop < len(st.pending) && (st.pending[drop].arrived < expiredBefore || len(st.pending)-drop >= maxPendingPerRank) {
		drop++
	}
	if drop > 0 {
		t.skipped[skipPendingExpired] += int64(drop)
		st.pending = slices.Delete(st.pending, 0, drop)
	}
	st.pending = append(st.pending, p)
}

// resolvePending ties the rank's pending wait intervals to the step spans
// now known; those still Unknown keep waiting.
func (c *stepsConnector) resolvePending(key rankKey, st *rankState, now time.Duration, t *tally) {
	kept := st.pending[:0]
	for _, p := range st.pending {
		if p.arrived < now-c.wait {
			t.skipped[skipPendingExpired]++
			continue
		}
		switch it, place := c.timeline.Place(key, p.iv.Start); place {
		case stepbusy.InStep:
			c.attachWait(stepKey{group: key.group, iteration: it}, key.rank, p.iv, t)
		case stepbusy.Unknown:
			kept = append(kept, p)
		}
	}
	clear(st.pending[len(kept):])
	st.pending = kept
}
