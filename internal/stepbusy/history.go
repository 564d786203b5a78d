package stepbusy // import "github.com/nemo-lens/otelcol-nemo/internal/stepbusy"

// History remembers every rank's busy times over its last steps, for the
// individual score. It keeps at most about 2 x limit ranks: when the current
// generation reaches limit ranks it becomes the previous one, and ranks not
// seen for a whole generation are forgotten. Not safe for concurrent use.
type History[K comparable] struct {
	steps     int
	limit     int
	cur, prev map[K]*recent
}

// recent is a ring of a rank's last busy times.
type recent struct {
	busy []int64
	next int
}

// NewHistory remembers the last steps busy times of up to about 2 x limit
// ranks. steps and limit are at least 1.
func NewHistory[K comparable](steps, limit int) *History[K] {
	return &History[K]{steps: max(steps, 1), limit: max(limit, 1), cur: make(map[K]*recent), prev: make(map[K]*recent)}
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
func (h *History[K]) Len() int { return len(h.cur) + len(h.prev) }

func (h *History[K]) get(rank K, create bool) *recent {
	if r := h.cur[rank]; r != nil {
		return r
	}
	r := h.prev[rank]
	switch {
	case r != nil:
		delete(h.prev, rank)
	case !create:
		return nil
	default:
		r = &recent{busy: make([]int64, 0, h.steps)}
	}
	if len(h.cur) >= h.limit {
		h.prev, h.cur = h.cur, make(map[K]*recent, h.limit)
	}
	h.cur[rank] = r
	return r
}
