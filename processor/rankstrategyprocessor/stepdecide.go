package rankstrategyprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor"

import (
	"time"

	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
)

// decideCause says why a step is decided now.
type decideCause uint8

const (
	decidedComplete   decideCause = iota // every rank of the world reported
	decidedAtWait                        // decision_wait is over
	decidedEarly                         // max_buffered_spans was reached
	decidedAtShutdown                    // the collector stops
)

func (b *stragglerBuffer) openStep(key stepKey, now time.Duration, prior *stepDecision) *openStep {
	st := &openStep{key: key, created: now, ranks: make(map[int64]*rankStep), prior: prior}
	b.open[key] = st
	b.queue = append(b.queue, st)
	return st
}

// openFor is the open step of key, nil when none. The spans of one chunk
// mostly belong to one step, so the last one found is remembered.
func (b *stragglerBuffer) openFor(key stepKey) *openStep {
	if c := b.lastOpen; c != nil && c.key == key && !c.decided {
		return c
	}
	st := b.open[key]
	if st != nil {
		b.lastOpen = st
	}
	return st
}

// rankIn is the rank's part of the open step, created when new; the last
// one is remembered, as in openFor.
func (b *stragglerBuffer) rankIn(st *openStep, id rankID) *rankStep {
	if b.lastRankStep != nil && b.lastRankOf == st && b.lastRank == id.rank && !st.decided {
		return b.lastRankStep
	}
	rs, added := st.rank(id.owner, id.rank)
	if added {
		b.observed++
	}
	b.lastRankOf, b.lastRank, b.lastRankStep = st, id.rank, rs
	return rs
}

// markComplete has the step decided at the next tick.
func (b *stragglerBuffer) markComplete(st *openStep) {
	if !st.complete {
		st.complete = true
		b.complete = append(b.complete, st)
	}
}

// oldestOpen is the oldest step not decided yet, nil when there is none. It
// drops the steps decided out of order from the head of the queue.
func (b *stragglerBuffer) oldestOpen() *openStep {
	for len(b.queue) > 0 && b.queue[0].decided {
		b.popOldest()
	}
	if len(b.queue) == 0 {
		return nil
	}
	return b.queue[0]
}

func (b *stragglerBuffer) popOldest() *openStep {
	st := b.queue[0]
	b.queue[0] = nil
	b.queue = b.queue[1:]
	return st
}

// decide scores every rank that reported the step on its busy time and
// keeps, among the dropped ones, those whose relative or individual score
// is below its threshold, worst first and at most max_ranks_per_step; it
// drops the others' spans.
func (b *stragglerBuffer) decide(st *openStep, cause decideCause, t *tally) {
	delete(b.open, st.key)
	st.decided = true
	if b.lastOpen == st {
		b.lastOpen = nil
	}
	if b.lastRankOf == st {
		b.lastRankOf, b.lastRankStep = nil, nil
	}
	b.observed -= st.observed

	scores := b.scores[:0]
	for rank, rs := range st.ranks {
		if rs.reported {
			scores = append(scores, stepbusy.Score{Rank: rank, Busy: rs.busy()})
		}
	}
	fastest := stepbusy.Fastest(scores)
	dec := st.prior
	if dec == nil {
		dec = &stepDecision{}
	} else if dec.fastest > 0 && (fastest == 0 || dec.fastest < fastest) {
		fastest = dec.fastest
	}
	dec.fastest = fastest
	stepbusy.Rate(scores, fastest, func(s stepbusy.Score) int64 {
		return b.history.Add(st.ranks[s.Rank].owner, s.Busy)
	})
	candidates := scores[:0]
	for _, s := range scores {
		if rs := st.ranks[s.Rank]; rs.dropped {
			if _, kept := dec.keptScore(s.Rank); !kept {
				candidates = append(candidates, s)
			}
		}
	}
	th := b.thresholds
	th.MaxRanks -= len(dec.kept)
	lastKept := 0
	if cause == decidedAtWait && st.prior == nil {
		lastKept = b.keepLastToReport(st, dec, th.MaxRanks, t)
		th.MaxRanks -= lastKept
	}
	picked := th.Select(candidates)
	dec.kept = append(dec.kept, picked...)
	b.scores = scores

	heldRanks, largest := 0, 0
	for rank, rs := range st.ranks {
		if !rs.dropped {
			continue
		}
		heldRanks++
		if score, keep := dec.keptScore(rank); keep {
			for _, ref := range rs.held {
				b.emit(ref, score, t)
			}
			continue
		}
		largest = max(largest, len(rs.held))
		for _, ref := range rs.held {
			b.drop(ref, t)
		}
	}
	if largest > 0 {
		b.rankStepHint = min(max(largest, 8), 4096)
	}
	st.ranks = nil
	b.decided.put(st.key, dec)
	t.stragglersKept += int64(len(picked) + lastKept)
	if st.prior != nil || heldRanks == 0 {
		return // a reopened step was counted when first decided
	}
	t.stepsDecided++
	switch cause {
	case decidedEarly:
		t.earlyDecisions++
	case decidedAtWait:
		if st.worldSize > st.reported {
			t.ranksMissing += st.worldSize - st.reported
		}
	}
	if cause != decidedEarly && st.reported == 1 && !b.warnedLoneRank {
		b.warnedLoneRank = true
		b.logger.Warn("a step was decided having seen a single rank, which is never a straggler; logged once",
			zap.Int64("iteration", st.key.iteration),
			zap.String("fix", "ranks are compared only within their run and group (group_keys): if every rank carries its own run id "+
				"(NeMo Lens mints one per process unless NEMO_LENS_RUN_ID, MEGATRON_OTEL_RUN_ID or SLURM_JOB_ID is set), no rank is ever compared with another; "+
				"set one run id for every rank of the run, and check that this collector receives every rank of the run"))
	}
}
