// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor"

import (
	"time"

	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// stepDecision is what was decided for a step: the ranks kept as stragglers,
// with their scores, and the fastest busy time, which a rank reporting after
// the decision is measured against.
type stepDecision struct {
	fastest int64 // ns; 0 when no rank had a usable busy time
	kept    []stepbusy.Score
}

func (d *stepDecision) keptScore(rank int64) (stepbusy.Score, bool) {
	for _, k := range d.kept {
		if k.Rank == rank {
			return k, true
		}
	}
	return stepbusy.Score{}, false
}

// openStep opens the step of key in the table; prior is its decision when
// a late rank reopens it.
func (b *stragglerBuffer) openStep(key steps.Step, now time.Duration, prior *stepDecision) *openStep {
	return b.open.Open(key, now, stepRanks{ranks: make(map[int64]*rankStep), prior: prior})
}

// rankIn is the rank's part of the open step, created when new; the last
// one is remembered, as in openFor.
func (b *stragglerBuffer) rankIn(st *openStep, id rankID) *rankStep {
	if b.lastRankStep != nil && b.lastRankOf == st && b.lastRank == id.rank && !st.Decided() {
		return b.lastRankStep
	}
	rs, added := st.Value.rank(id.owner, id.rank)
	if added {
		b.observed++
	}
	b.lastRankOf, b.lastRank, b.lastRankStep = st, id.rank, rs
	return rs
}

// decider decides the steps the table hands out, counting into t.
func (b *stragglerBuffer) decider(t *tally) func(*openStep, steps.Cause) {
	return func(st *openStep, cause steps.Cause) { b.decide(st, cause, t) }
}

// decide scores every rank that reported the step on its busy time and
// keeps, among the dropped ones, those whose relative or individual score
// is below its threshold, worst first and at most max_ranks_per_step; it
// drops the others' spans.
func (b *stragglerBuffer) decide(st *openStep, cause steps.Cause, t *tally) {
	if b.lastRankOf == st {
		b.lastRankOf, b.lastRankStep = nil, nil
	}
	b.observed -= st.Value.observed

	scores := b.scores[:0]
	for rank, rs := range st.Value.ranks {
		if rs.reported {
			scores = append(scores, stepbusy.Score{Rank: rank, Busy: rs.Busy()})
		}
	}
	fastest := stepbusy.Fastest(scores)
	dec := st.Value.prior
	if dec == nil {
		dec = &stepDecision{}
	} else if dec.fastest > 0 && (fastest == 0 || dec.fastest < fastest) {
		fastest = dec.fastest
	}
	dec.fastest = fastest
	stepbusy.Rate(scores, fastest, func(s stepbusy.Score) int64 {
		return b.history.Add(st.Value.ranks[s.Rank].owner, s.Busy)
	})
	candidates := scores[:0]
	for _, s := range scores {
		if rs := st.Value.ranks[s.Rank]; rs.dropped {
			if _, kept := dec.keptScore(s.Rank); !kept {
				candidates = append(candidates, s)
			}
		}
	}
	th := b.thresholds
	th.MaxRanks -= len(dec.kept)
	lastKept := 0
	if cause == steps.AtWait && st.Value.prior == nil {
		lastKept = b.keepLastToReport(st, dec, th.MaxRanks, t)
		th.MaxRanks -= lastKept
	}
	picked := th.Select(candidates)
	dec.kept = append(dec.kept, picked...)
	b.scores = scores

	heldRanks, largest := 0, 0
	for rank, rs := range st.Value.ranks {
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
	st.Value.ranks = nil
	b.decided.Put(st.Key, dec)
	t.stragglersKept += int64(len(picked) + lastKept)
	if st.Value.prior != nil || heldRanks == 0 {
		return // a reopened step was counted when first decided
	}
	t.stepsDecided++
	switch cause {
	case steps.Early:
		t.earlyDecisions++
	case steps.AtWait:
		if st.WorldSize > st.Value.reported {
			t.ranksMissing += st.WorldSize - st.Value.reported
		}
	}
	if cause != steps.Early && st.Value.reported == 1 && !b.warnedLoneRank {
		b.warnedLoneRank = true
		b.logger.Warn("a step was decided having seen a single rank, which is never a straggler; logged once",
			zap.Int64("iteration", st.Key.Iteration),
			zap.String("fix", "ranks are compared only within their run and group (group_keys): if every rank carries its own run id "+
				"(NeMo Lens mints one per process unless NEMO_LENS_RUN_ID, MEGATRON_OTEL_RUN_ID or SLURM_JOB_ID is set), no rank is ever compared with another; "+
				"set one run id for every rank of the run, and check that this collector receives every rank of the run"))
	}
}
