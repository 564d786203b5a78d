// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor"

import (
	"math"
	"time"

	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// emit passes a held span on as kept, at the next tick.
func (b *stragglerBuffer) emit(h heldSpan, score stepbusy.Score, t *tally) {
	emptied := b.out.add(h, score)
	t.kept[reasonStraggler]++
	t.held++
	if emptied {
		b.uncount(h.Chunk, t)
	}
}

// drop lets a span go, if held.
func (b *stragglerBuffer) drop(h heldSpan, t *tally) {
	if h.Chunk == nil {
		return
	}
	t.dropped[reasonNotSelected]++
	if h.Release() {
		b.uncount(h.Chunk, t)
	}
}

// uncount stops counting a chunk that holds nothing any more.
func (b *stragglerBuffer) uncount(c *steps.Chunk[rankID], t *tally) {
	b.held -= c.Len()
	t.held -= int64(c.Len())
}

// expirePending drops the pending spans that arrived at or before through
// and returns how many of them were held.
func (b *stragglerBuffer) expirePending(through time.Duration, t *tally) int {
	n := 0
	for _, st := range b.ranks {
		st.pending.RemoveIf(func(it pendingSpan, _ int64, arrived time.Duration) bool {
			if arrived > through {
				return false
			}
			if it.held.Chunk != nil {
				n++
			}
			b.drop(it.held, t)
			return true
		})
	}
	return n
}

// forgetIdleRanks drops the state of ranks that have nothing pending and
// sent nothing for a span_wait; more than max_buffered_spans of them
// are not kept even if they are not idle yet.
func (b *stragglerBuffer) forgetIdleRanks(now time.Duration) {
	crowded := len(b.ranks) > b.maxHeld
	for owner, st := range b.ranks {
		if st.pending.Len() == 0 && (crowded || now-st.lastSeen >= b.spanWait) {
			delete(b.ranks, owner)
		}
	}
}

func (b *stragglerBuffer) oldestPending() (time.Duration, bool) {
	oldest, found := time.Duration(math.MaxInt64), false
	for _, st := range b.ranks {
		if arrived, ok := st.pending.Oldest(); ok && arrived < oldest {
			oldest, found = arrived, true
		}
	}
	return oldest, found
}

func (b *stragglerBuffer) overBudget() bool {
	return b.held+b.out.count > b.maxHeld || b.observed > b.maxHeld
}

// enforceBudget keeps the buffer within max_buffered_spans: the oldest open
// step is decided early with what it has, or, when spans waiting for a step
// are older, the oldest of those are dropped (an eighth of span_wait's
// worth at a time). Either way it is counted.
func (b *stragglerBuffer) enforceBudget(t *tally) {
	for b.overBudget() {
		oldest, pending := b.oldestPending()
		if st := b.open.Oldest(); st != nil && (!pending || st.Created <= oldest) {
			b.open.DecideOldest(b.decider(t))
			continue
		}
		if !pending {
			return // only kept spans waiting for the next tick are left
		}
		b.expirePending(oldest+max(b.spanWait/8, 1), t)
	}
}
