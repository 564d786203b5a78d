// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stragglers // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor/internal/stragglers"

import (
	"cmp"
	"slices"

	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// decision is what was decided for a step: the ranks kept as stragglers,
// with their scores. A rank reporting after the decision is kept or not
// against it, its late spans follow it.
type decision struct {
	kept []stepbusy.Score
}

func (d *decision) keptScore(rank int64) (stepbusy.Score, bool) {
	for _, k := range d.kept {
		if k.Rank == rank {
			return k, true
		}
	}
	return stepbusy.Score{}, false
}

// Decided keeps, among the dropped ranks of the step the engine scored,
// those whose relative or individual score is below its threshold, worst
// first and at most max_ranks_per_step (a reopened step's earlier
// stragglers included), and, at decision_wait, the last ranks to report;
// it drops the others' spans.
func (b *Buffer) Decided(d *steps.Decision[decision]) {
	hs := b.steps.take(d.Step)
	dec := d.Value
	candidates := b.scores[:0]
	if hs != nil {
		for i := range d.Ranks {
			s := d.Ranks[i].Score
			if _, dropped := hs.ranks[s.Rank]; !dropped {
				continue
			}
			if _, kept := dec.keptScore(s.Rank); !kept {
				candidates = append(candidates, s)
			}
		}
	}
	th := b.thresholds
	th.MaxRanks -= len(dec.kept)
	lastKept := 0
	if d.Cause == steps.AtWait && !d.Reopened {
		lastKept = b.keepLastToReport(d, th.MaxRanks)
		th.MaxRanks -= lastKept
	}
	picked := th.Select(candidates)
	dec.kept = append(dec.kept, picked...)
	b.scores = candidates[:0]
	b.t.StragglersKept += int64(len(picked) + lastKept)
	if hs == nil {
		return // no dropped rank in the step: nothing held, nothing to count
	}

	largest := 0
	for rank, rh := range hs.ranks {
		if score, keep := dec.keptScore(rank); keep {
			for _, s := range rh.held {
				b.emit(s, score)
			}
			continue
		}
		largest = max(largest, len(rh.held))
		b.summarize(d, rank, rh)
		for _, s := range rh.held {
			b.drop(s)
		}
	}
	if largest > 0 {
		b.steps.hint = min(max(largest, 8), 4096)
	}
	if d.Reopened {
		return // counted when first decided
	}
	b.t.StepsDecided++
	switch d.Cause {
	case steps.Early:
		b.t.EarlyDecisions++
	case steps.AtWait:
		b.t.RanksMissing += d.Missing()
	}
	if d.Cause != steps.Early && d.Reported == 1 && b.sum == nil && !b.warnedLoneRank {
		b.warnedLoneRank = true
		b.logger.Warn("a step was decided having seen a single rank, which is never a straggler; logged once",
			zap.Int64("iteration", d.Step.Iteration),
			zap.String("fix", "ranks are compared only within their run and group (group_keys): if every rank carries its own run id "+
				"(NeMo Lens mints one per process unless NEMO_LENS_RUN_ID, MEGATRON_OTEL_RUN_ID or SLURM_JOB_ID is set), no rank is ever compared with another; "+
				"set one run id for every rank of the run, and check that this collector receives every rank of the run"))
	}
}

// summarize writes the summary of a dropped rank's step that is not kept
// (a kept step's spans go to the gateway themselves), when summarizing.
func (b *Buffer) summarize(d *steps.Decision[decision], rank int64, rh *rankHeld) {
	if b.sum == nil || !rh.step.IsHeld() {
		return
	}
	i, found := slices.BinarySearchFunc(d.Ranks, rank, func(r steps.RankStep, rank int64) int { return cmp.Compare(r.Score.Rank, rank) })
	if !found {
		return
	}
	b.sum.step(steps.Rank{Group: d.Step.Group, Rank: rank}, rh.step.Span(), d.Step.Iteration, rh.forwards, &d.Ranks[i])
}

// keepLastToReport keeps what arrived of the ranks that had not reported a
// step by the end of its decision_wait, when they are the last to report:
// every other rank of the world reported and they are at most the room
// max_ranks_per_step leaves. A rank that is that late is the step's worst
// straggler (a rank lost, hung or cut off leaves its step unreported), so it
// comes before the ranks that reported, with scores of 0. More ranks missing
// than that is a lost node or collector, not a straggler: nothing of them
// is kept.
//
// Without its step span a rank's spans never found their step (the step
// span ties them), so they are taken from the spans the rank has waiting:
// those that start within the step as the other ranks reported it. A step
// span that arrives later reopens the step and is kept with the rest. It
// returns the ranks kept.
func (b *Buffer) keepLastToReport(d *steps.Decision[decision], room int) int {
	missing := d.Missing()
	if d.Reported == 0 || missing <= 0 || missing > int64(room) {
		return 0
	}
	from, to, ok := reportedWindow(d.Ranks)
	if !ok {
		return 0
	}
	kept := 0
	for rank := range d.WorldSize {
		if _, reported := slices.BinarySearchFunc(d.Ranks, rank, func(r steps.RankStep, rank int64) int { return cmp.Compare(r.Score.Rank, rank) }); reported {
			continue
		}
		score := stepbusy.Score{Rank: rank, Busy: -1}
		found := false
		b.engine.TakeWaiting(steps.Rank{Group: d.Step.Group, Rank: rank}, func(s steps.Held, start int64) bool {
			if s.Chunk == nil || start < from || start > to {
				return false
			}
			b.emit(s, score)
			found = true
			return true
		})
		if found {
			d.Value.kept = append(d.Value.kept, score)
			kept++
		}
	}
	return kept
}

// reportedWindow is the time the reporting ranks' step spans cover, from the
// earliest start to the latest end, widened by a tenth of it on each side
// for the clocks of different hosts.
func reportedWindow(ranks []steps.RankStep) (from, to int64, ok bool) {
	for _, r := range ranks {
		if !ok || r.Start < from {
			from = r.Start
		}
		if !ok || r.End > to {
			to = r.End
		}
		ok = true
	}
	slack := (to - from) / 10
	return from - slack, to + slack, ok && to > from
}
