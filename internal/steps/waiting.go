// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package steps // import "github.com/nemo-lens/otelcol-nemo/internal/steps"

import (
	"slices"
	"time"
)

// Waiting are a rank's spans (or what is kept of them) that no step span
// seen so far places, oldest first: their step span, which ends after them,
// has not arrived yet.
type Waiting[P any] struct {
	items []waitingItem[P]
}

type waitingItem[P any] struct {
	item    P
	start   int64
	arrived time.Duration
}

// Len is the number of items waiting.
func (w *Waiting[P]) Len() int { return len(w.items) }

// Add has an item starting at start wait for its step span.
func (w *Waiting[P]) Add(item P, start int64, arrived time.Duration) {
	w.items = append(w.items, waitingItem[P]{item: item, start: start, arrived: arrived})
}

// Resolve places the waiting items again on the rank's steps r, after a new
// step span: place gets each item with its place, and says whether it
// stops waiting (an item still Unknown keeps waiting unless place says
// otherwise).
func (w *Waiting[P]) Resolve(r *RankSteps, place func(item P, iteration int64, where Place) (done bool)) {
	kept := w.items[:0]
	for _, it := range w.items {
		iteration, where := r.Place(it.start)
		if !place(it.item, iteration, where) {
			kept = append(kept, it)
		}
	}
	clear(w.items[len(kept):])
	w.items = kept
}

// RemoveIf removes the items remove says, in arrival order, and returns how
// many it removed; remove may keep what it removes (emit it, drop it).
func (w *Waiting[P]) RemoveIf(remove func(item P, start int64, arrived time.Duration) bool) int {
	kept := w.items[:0]
	for _, it := range w.items {
		if !remove(it.item, it.start, it.arrived) {
			kept = append(kept, it)
		}
	}
	n := len(w.items) - len(kept)
	clear(w.items[len(kept):])
	w.items = kept
	return n
}

// Oldest is the oldest item and when it arrived; false when none waits.
func (w *Waiting[P]) Oldest() (P, time.Duration, bool) {
	if len(w.items) == 0 {
		var zero P
		return zero, 0, false
	}
	return w.items[0].item, w.items[0].arrived, true
}

// compact gives back the memory of a list that grew large and emptied.
func (w *Waiting[P]) compact() {
	if len(w.items) == 0 && cap(w.items) > 64 {
		w.items = slices.Clip(w.items[:0:0])
	}
}
