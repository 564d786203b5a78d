// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor"

import (
	"math"
	"slices"
	"time"

	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
)

func (b *stragglerBuffer) emit(ref spanRef, score stepbusy.Score, t *tally) {
	if !ref.ghost {
		b.out.add(ref, score)
		t.kept[reasonStraggler]++
		t.held++
	}
	b.release(ref.chunk, t)
}

func (b *stragglerBuffer) drop(ref spanRef, t *tally) {
	if !ref.ghost {
		t.dropped[reasonNotSelected]++
	}
	b.release(ref.chunk, t)
}

// release gives up one reference to a chunk; the last one uncounts it.
func (b *stragglerBuffer) release(c *heldChunk, t *tally) {
	c.waiting--
	if c.waiting == 0 {
		b.held -= c.spans
		if !c.observed {
			t.held -= int64(c.spans)
		}
	}
}

// expirePending drops the pending spans that arrived at or before through
// and returns how many of them belonged to dropped ranks.
func (b *stragglerBuffer) expirePending(through time.Duration, t *tally) int {
	n := 0
	for _, st := range b.ranks {
		k := 0
		for k < len(st.unresolved) && st.unresolved[k].chunk.arrival <= through {
			if !st.unresolved[k].ghost {
				n++
			}
			b.drop(st.unresolved[k], t)
			k++
		}
		if k > 0 {
			st.unresolved = slices.Delete(st.unresolved, 0, k)
		}
	}
	return n
}

// forgetIdleRanks drops the state of ranks that have nothing pending and
// sent nothing for a span_wait; more than max_buffered_spans of them
// are not kept even if they are not idle yet.
func (b *stragglerBuffer) forgetIdleRanks(now time.Duration) {
	crowded := len(b.ranks) > b.maxHeld
	for owner, st := range b.ranks {
		if len(st.unresolved) == 0 && (crowded || now-st.lastSeen >= b.spanWait) {
			delete(b.ranks, owner)
		}
	}
}

func (b *stragglerBuffer) oldestPending() (time.Duration, bool) {
	oldest, found := time.Duration(math.MaxInt64), false
	for _, st := range b.ranks {
		if len(st.unresolved) > 0 && st.unresolved[0].chunk.arrival < oldest {
			oldest, found = st.unresolved[0].chunk.arrival, true
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
