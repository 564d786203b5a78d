package nemostepsconnector // import "github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector"

import (
	"cmp"
	"slices"
	"time"

	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
)

// openStep is one (run, group, iteration) whose ranks are still reporting.
type openStep struct {
	key       stepKey
	created   time.Duration
	worldSize int64
	ranks     []rankStep
	index     map[int64]int32 // rank -> its entry in ranks
	// prior is what the step's first decision saw, when a late rank's step
	// span reopened it: the late ranks are scored against its fastest rank.
	prior             *decidedStep
	complete, decided bool
}

// rankStep is one rank's step span and the wait intervals tied to it.
type rankStep struct {
	rank       int64
	start, end int64
	waits      []stepbusy.Interval
	labels     *rankLabels
}

// reported counts the ranks that reported the step, its first decision's
// included.
func (st *openStep) reported() int64 {
	n := int64(len(st.ranks))
	if st.prior != nil {
		n += st.prior.reported
	}
	return n
}

// stepFor is the open step of key, opened (or reopened after a decision)
// when there is none.
func (c *stepsConnector) stepFor(key stepKey, now time.Duration) *openStep {
	if st := c.open[key]; st != nil {
		return st
	}
	st := &openStep{key: key, created: now, index: make(map[int64]int32), prior: c.decided.get(key)}
	c.open[key] = st
	c.queue = append(c.queue, st)
	return st
}

// markComplete has the step decided at the next tick.
func (c *stepsConnector) markComplete(st *openStep) {
	if !st.complete {
		st.complete = true
		c.complete = append(c.complete, st)
	}
}

// oldestOpen is the oldest step not decided yet, nil when there is none. It
// drops the steps decided out of order from the head of the queue.
func (c *stepsConnector) oldestOpen() *openStep {
	for len(c.queue) > 0 && c.queue[0].decided {
		c.popOldest()
	}
	if len(c.queue) == 0 {
		return nil
	}
	return c.queue[0]
}

func (c *stepsConnector) popOldest() *openStep {
	st := c.queue[0]
	c.queue[0] = nil
	c.queue = c.queue[1:]
	return st
}

// enforceBudget decides the oldest open steps early while more rank steps
// are open than max_open_rank_steps allows.
func (c *stepsConnector) enforceBudget(t *tally) {
	for c.openRankSteps > c.maxOpen {
		st := c.oldestOpen()
		if st == nil {
			return
		}
		c.decide(c.popOldest(), decidedEarly, t)
	}
}

// decide scores every rank that reported the step on its busy time, as
// rank_strategy's straggler retention does, emits (or aggregates) the
// ranks' data points and counts the stragglers of the run.
func (c *stepsConnector) decide(st *openStep, cause decideCause, t *tally) {
	delete(c.open, st.key)
	st.decided = true
	c.openRankSteps -= len(st.ranks)
	t.openRankSteps -= int64(len(st.ranks))
	if len(st.ranks) == 0 {
		return
	}
	// Ranks in order, so that the output is in a stable order.
	slices.SortFunc(st.ranks, func(a, b rankStep) int { return cmp.Compare(a.rank, b.rank) })
	scores := c.scores[:0]
	for i := range st.ranks {
		r := &st.ranks[i]
		// Score.Rank holds the entry's index: it is only an identifier here.
		scores = append(scores, stepbusy.Score{Rank: int64(i), Busy: stepbusy.Busy(r.start, r.end, r.waits)})
	}
	fastest := stepbusy.Fastest(scores)
	if p := st.prior; p != nil && p.fastest > 0 && (fastest == 0 || p.fastest < fastest) {
		fastest = p.fastest
	}
	stepbusy.Rate(scores, fastest, func(s stepbusy.Score) int64 {
		return c.history.Add(rankKey{group: st.key.group, rank: st.ranks[s.Rank].rank}, s.Busy)
	})
	var stragglers, lastEnd int64
	for _, s := range scores {
		r := &st.ranks[s.Rank]
		straggles := c.thresholds.Straggles(s)
		if straggles {
			stragglers++
		}
		c.observe(rankKey{group: st.key.group, rank: r.rank}, r, s)
		lastEnd = max(lastEnd, r.end)
	}
	c.scores = scores[:0]
	c.countStragglers(st.key.group, st.ranks[0].labels, stragglers, st.ranks[0].start, lastEnd)

	reported := st.reported()
	if st.prior == nil {
		// A reopened step was counted when it was first decided.
		t.decided[cause]++
		if cause == decidedAtWait && st.worldSize > reported {
			t.ranksMissing += st.worldSize - reported
		}
		c.decided.put(st.key, &decidedStep{fastest: fastest, reported: reported})
	} else {
		st.prior.fastest, st.prior.reported = fastest, reported
	}
	st.ranks, st.index = nil, nil
}

// decidedStep is what a decided step leaves behind for its late ranks.
type decidedStep struct {
	fastest  int64
	reported int64
}

// decidedCache remembers the last decided steps, oldest forgotten first.
type decidedCache struct {
	steps map[stepKey]*decidedStep
	order []stepKey
	next  int
}

func newDecidedCache(size int) decidedCache {
	return decidedCache{steps: make(map[stepKey]*decidedStep, size), order: make([]stepKey, 0, size)}
}

func (d *decidedCache) get(key stepKey) *decidedStep { return d.steps[key] }

func (d *decidedCache) put(key stepKey, s *decidedStep) {
	if _, ok := d.steps[key]; ok {
		d.steps[key] = s
		return
	}
	if len(d.order) < cap(d.order) {
		d.order = append(d.order, key)
	} else {
		delete(d.steps, d.order[d.next])
		d.order[d.next] = key
		d.next = (d.next + 1) % len(d.order)
	}
	d.steps[key] = s
}
