// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package lensemu // import "github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"

import (
	"slices"
	"time"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
)

// Truth is an emulated run's wall time by goodput category, accounted from
// what its ranks were told to do (their schedule), not from their spans:
// the ground truth the collector's goodput is checked against.
type Truth struct {
	Productive, Straggler, Startup, CheckpointLoad, CheckpointSave, Evaluation time.Duration
	Stalled, LostProgress, Restart, Other                                      time.Duration
	Wall                                                                       time.Duration
}

// Categories are the truth by the collector's category names.
func (t Truth) Categories() map[string]time.Duration {
	return map[string]time.Duration{
		"productive": t.Productive, "straggler": t.Straggler, "startup": t.Startup,
		"checkpoint_load": t.CheckpointLoad, "checkpoint_save": t.CheckpointSave, "evaluation": t.Evaluation,
		"stalled": t.Stalled, "lost_progress": t.LostProgress, "restart": t.Restart, "other": t.Other,
	}
}

// Account is the truth of a run whose attempts were Jobs of these ranks,
// in order; an attempt's first rank holds its timing (Start, Setup,
// CheckpointLoad, FirstIteration, Steps, HangAt, SaveEvery, EvalEvery),
// the same for all its ranks. The rules are the collector's, as
// docs/data-model.md states them: each attempt's set-up before its first
// step is startup but for its checkpoint load; a step's straggler time is
// its slowest rank's busy time over the median rank's; a step redone by a
// later attempt is lost progress; a hang is stalled from the last
// completed step until the next attempt starts; the gap after an attempt
// that ended cleanly is restart; the rest is other.
func Account(attempts ...[]Rank) Truth {
	var t Truth
	var first, last time.Time
	for k, ranks := range attempts {
		ranks = withSchedules(ranks)
		for i := range ranks {
			ranks[i].defaults()
		}
		r := ranks[0]
		t0 := r.sched.t0
		if k == 0 {
			first = t0
		}
		t.Startup += r.Setup - r.CheckpointLoad
		t.CheckpointLoad += r.CheckpointLoad
		var next *Rank
		if k+1 < len(attempts) {
			next = &attempts[k+1][0]
		}
		lastStep := r.Steps
		if r.HangAt > 0 {
			lastStep = r.HangAt - 1
		}
		cursor, lastStepEnd := r.Setup, r.Setup
		for it := r.FirstIteration; it <= lastStep; it++ {
			step := r.stepOf(it)
			d := step.Duration()
			if next != nil && next.firstIteration() <= it {
				t.LostProgress += d
			} else {
				straggler := stragglerOf(ranks, it)
				t.Straggler += straggler
				t.Productive += d - straggler
			}
			cursor += d
			lastStepEnd = cursor
			if r.HangAt > 0 && it == lastStep {
				break // what came after the last completed step is the hang's
			}
			if r.SaveEvery > 0 && it%r.SaveEvery == 0 {
				t.CheckpointSave += r.SaveDuration
				cursor += r.SaveDuration
			}
			if r.EvalEvery > 0 && it%r.EvalEvery == 0 {
				t.Evaluation += r.EvalDuration
				cursor += r.EvalDuration
			}
		}
		switch {
		case r.HangAt > 0 && next != nil:
			t.Stalled += next.sched0().Sub(t0.Add(lastStepEnd))
		case r.HangAt > 0:
			last = t0.Add(lastStepEnd + hungTail(r))
			t.Stalled += hungTail(r)
		default:
			end := t0.Add(cursor + r.Setup) // megatron.pretrain ends a set-up after train
			last = end
			if next != nil {
				t.Restart += next.sched0().Sub(end)
			}
		}
	}
	t.Wall = last.Sub(first)
	t.Other = t.Wall - t.Productive - t.Straggler - t.Startup - t.CheckpointLoad - t.CheckpointSave -
		t.Evaluation - t.Stalled - t.LostProgress - t.Restart
	return t
}

// firstIteration is the rank's first iteration, its default applied.
func (r Rank) firstIteration() int { return max(r.FirstIteration, 1) }

// sched0 is when the rank's job starts: an attempt after the first sets
// Start.
func (r Rank) sched0() time.Time { return r.Start }

// stragglerOf is what iteration it's slowest rank cost: its busy time (its
// compute and the optimizer) over the median rank's.
func stragglerOf(ranks []Rank, it int) time.Duration {
	busy := make([]time.Duration, len(ranks))
	for i := range ranks {
		busy[i] = ranks[i].ComputeDuration(it) + OptimizerTime
	}
	if len(busy) < 2 {
		return 0
	}
	slices.Sort(busy)
	return busy[len(busy)-1] - busy[len(busy)/2]
}

// hungTail is how far into the hung step its ranks still ended spans: the
// latest end among the spans a Blocked rank ends.
func hungTail(r Rank) time.Duration {
	step := r.stepOf(r.HangAt)
	cutoff := step.HangCutoff(r.StepSpanName, lensfixture.Blocked)
	var tail time.Duration
	for _, p := range step.Plans(r.StepSpanName) {
		if p.Parent >= 0 && p.To <= cutoff {
			tail = max(tail, p.To)
		}
	}
	return tail
}
