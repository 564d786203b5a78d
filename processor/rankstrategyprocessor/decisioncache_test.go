package rankstrategyprocessor

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
)

func TestDecisionCacheEvictsOldest(t *testing.T) {
	c := newDecisionCache(2)
	for it := range int64(3) {
		c.put(stepKey{iteration: it}, &stepDecision{fastest: it})
	}
	assert.Nil(t, c.get(stepKey{iteration: 0}))
	assert.NotNil(t, c.get(stepKey{iteration: 1}))
	assert.NotNil(t, c.get(stepKey{iteration: 2}))
	assert.Len(t, c.byStep, 2)

	// Putting a cached step again replaces it without evicting another.
	c.put(stepKey{iteration: 2}, &stepDecision{fastest: 7})
	assert.Equal(t, int64(7), c.get(stepKey{iteration: 2}).fastest)
	assert.NotNil(t, c.get(stepKey{iteration: 1}))
}

func TestDecisionKeptScore(t *testing.T) {
	d := &stepDecision{kept: []stepbusy.Score{{Rank: 4, Relative: 0.5, Individual: 0.9}}}
	s, ok := d.keptScore(4)
	assert.True(t, ok)
	assert.Equal(t, 0.5, s.Relative)
	_, ok = d.keptScore(5)
	assert.False(t, ok)
}
