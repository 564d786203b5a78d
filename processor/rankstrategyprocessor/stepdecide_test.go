// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
)

func TestDecisionKeptScore(t *testing.T) {
	d := &stepDecision{kept: []stepbusy.Score{{Rank: 4, Relative: 0.5, Individual: 0.9}}}
	s, ok := d.keptScore(4)
	assert.True(t, ok)
	assert.Equal(t, 0.5, s.Relative)
	_, ok = d.keptScore(5)
	assert.False(t, ok)
}
