// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepbusy // import "github.com/nemo-lens/otelcol-nemo/internal/stepbusy"

import "github.com/nemo-lens/otelcol-nemo/internal/boundedmap"

// History remembers every rank's busy times over its last steps, for the
// individual score. It keeps at most about 2 x limit ranks: when the current
// generation reaches limit ranks it becomes the previous one, and ranks not
// seen for a whole generation are forgotten. Not safe for concurrent use.
type History[K comparable] struct {
	steps int
	ranks *boundedmap.Map[K, *recent]
}

// recent is a ring of a rank's last busy times.
type recent struct {
	busy []int64
	next int
}

// NewHistory remembers the last steps busy times of up to about 2 x limit
// ranks. steps and limit are at least 1.
func NewHistory[K comparable](steps, limit int) *History[K] {
	return &History[K]{steps: max(steps, 1), ranks: boundedmap.New[K, *recent](limit)}
}

// Add records a step's busy time (ignored when <= 0) and returns the rank's
// best (smallest) busy time over its last steps, this one included; 0 when
// none is known.
func (h *History[K]) Add(rank K, busy int64) int64 {
	r := h.get(rank, busy > 0)
	if r == nil {
		return 0
	}
	if busy > 0 {
		if len(r.busy) < h.steps {
			r.busy = append(r.busy, busy)
		} else {
			r.busy[r.next] = busy
			r.next = (r.next + 1) % h.steps
		}
	}
	var best int64
	for _, b := range r.busy {
		if best == 0 || b < best {
			best = b
		}
	}
	return best
}

// Len is the number of ranks remembered.
func (h *History[K]) Len() int { return h.ranks.Len() }

func (h *History[K]) get(rank K, create bool) *recent {
	if r, ok := h.ranks.Get(rank); ok || !create {
		return r
	}
	return h.ranks.GetOrNew(rank, func() *recent { return &recent{busy: make([]int64, 0, h.steps)} })
}
