// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor"

import (
	"time"

	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// keepLastToReport keeps what arrived of the ranks that had not reported a
// step by the end of its decision_wait, when they are the last to report:
// every other rank of the world reported and they are at most the room
// max_ranks_per_step leaves. A rank that is that late is the step's worst
// straggler (a rank lost, hung or cut off leaves its step unreported), so it
// comes before the ranks that reported, with scores of 0. More ranks missing
// than that is a lost node or collector, not a straggler: they are counted
// (ranks_missing), and nothing of them is kept.
//
// Without its step span a rank's spans never found their step (the step
// span ties them), so they are taken from the rank's pending spans: those of
// a dropped rank that start within the step as the other ranks reported it.
// A step span that arrives later reopens the step and is kept with the rest.
// It returns the ranks kept; call with mu held.
func (b *stragglerBuffer) keepLastToReport(st *openStep, dec *stepDecision, room int, t *tally) int {
	missing := st.WorldSize - st.Value.reported
	if st.Value.reported == 0 || missing <= 0 || missing > int64(room) {
		return 0
	}
	from, to, ok := reportedWindow(st)
	if !ok {
		return 0
	}
	kept := 0
	for rank := range st.WorldSize {
		if rs := st.Value.ranks[rank]; rs != nil && rs.reported {
			continue
		}
		owner := b.reader.Owner(steps.Rank{Group: st.Key.Group, Rank: rank})
		state := b.ranks[owner]
		if state == nil {
			continue
		}
		score := stepbusy.Score{Rank: rank, Busy: -1}
		found := false
		state.pending.RemoveIf(func(it pendingSpan, start int64, _ time.Duration) bool {
			if it.held.Chunk == nil || start < from || start > to {
				return false
			}
			b.emit(it.held, score, t)
			found = true
			return true
		})
		if found {
			dec.kept = append(dec.kept, score)
			kept++
		}
	}
	return kept
}

// reportedWindow is the time the reporting ranks' step spans cover, from the
// earliest start to the latest end, widened by a tenth of it on each side
// for the clocks of different hosts.
func reportedWindow(st *openStep) (from, to int64, ok bool) {
	for _, rs := range st.Value.ranks {
		if !rs.reported {
			continue
		}
		if !ok || rs.Start < from {
			from = rs.Start
		}
		if !ok || rs.End > to {
			to = rs.End
		}
		ok = true
	}
	slack := (to - from) / 10
	return from - slack, to + slack, ok && to > from
}
