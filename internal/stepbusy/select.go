// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepbusy // import "github.com/nemo-lens/otelcol-nemo/internal/stepbusy"

import (
	"cmp"
	"slices"
)

// Score is one rank's result on one step.
type Score struct {
	Rank int64
	// Busy is the rank's busy time in ns, <= 0 when unknown.
	Busy int64
	// Relative is the step's fastest busy time over this rank's.
	Relative float64
	// Individual is this rank's best recent busy time over this one.
	Individual float64
}

// Worst is the lower of the two scores: how far behind the rank is, by
// whichever measure puts it further behind.
func (s Score) Worst() float64 { return min(s.Relative, s.Individual) }

// Thresholds decide which ranks of a step are stragglers. A score of 0
// switches that measure off.
type Thresholds struct {
	// Relative and Individual: a rank whose score is below either one is a
	// straggler.
	Relative, Individual float64
	// MaxRanks caps the stragglers of one step, worst first.
	MaxRanks int
}

// Straggles reports whether the score is below either threshold.
func (t Thresholds) Straggles(s Score) bool {
	return s.Busy > 0 && (s.Relative < t.Relative || s.Individual < t.Individual)
}

// Select reorders scores so that the stragglers come first, worst first (ties
// by rank), and returns them: a prefix of scores of at most MaxRanks entries.
func (t Thresholds) Select(scores []Score) []Score {
	n := 0
	for i, s := range scores {
		if t.Straggles(s) {
			scores[n], scores[i] = scores[i], scores[n]
			n++
		}
	}
	picked := scores[:n]
	slices.SortFunc(picked, func(a, b Score) int {
		if c := cmp.Compare(a.Worst(), b.Worst()); c != 0 {
			return c
		}
		return cmp.Compare(a.Rank, b.Rank)
	})
	return picked[:min(n, max(t.MaxRanks, 0))]
}
