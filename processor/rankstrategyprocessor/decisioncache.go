package rankstrategyprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor"

import "github.com/nemo-lens/otelcol-nemo/internal/stepbusy"

// stepKey names one training step of one run and worker group.
type stepKey struct {
	group     uint64
	iteration int64
}

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

// decisionCache remembers the last size decisions, first in first out.
type decisionCache struct {
	size   int
	byStep map[stepKey]*stepDecision
	ring   []stepKey
	next   int
}

func newDecisionCache(size int) decisionCache {
	return decisionCache{size: size, byStep: make(map[stepKey]*stepDecision)}
}

func (c *decisionCache) get(k stepKey) *stepDecision { return c.byStep[k] }

func (c *decisionCache) put(k stepKey, d *stepDecision) {
	if _, ok := c.byStep[k]; ok {
		c.byStep[k] = d
		return
	}
	if len(c.ring) < c.size {
		c.ring = append(c.ring, k)
	} else {
		delete(c.byStep, c.ring[c.next])
		c.ring[c.next] = k
		c.next = (c.next + 1) % c.size
	}
	c.byStep[k] = d
}
