// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package stepbusy measures how long a training rank was busy in one step and
// scores ranks against each other and against their own recent steps, to find
// stragglers under synchronous data parallelism.
//
// In synchronous training every rank's step ends at almost the same moment:
// the gradient all-reduce at the end of the step waits for the slowest rank.
// The slow rank spends longer computing; the others spend the same extra time
// waiting inside communication spans. A step's wall duration is therefore
// nearly the same on every rank, and its busy time (duration minus time spent
// waiting) is what tells the ranks apart.
//
// The package knows nothing of pdata or of any component: times are int64
// nanoseconds, ranks are int64, so that a processor and a connector can share
// it.
package stepbusy // import "github.com/nemo-lens/otelcol-nemo/internal/stepbusy"

import (
	"cmp"
	"math"
	"slices"
)

// Interval is a span of time [Start, End) in nanoseconds.
type Interval struct {
	Start, End int64
}

// StepTime is one rank's part of one step as its busy time sees it: the
// rank's step span [Start, End) and the wait intervals tied to it. The
// components that score ranks keep one per rank of an open step.
type StepTime struct {
	Start, End int64
	Waits      []Interval
}

// AddWait ties a wait interval to the step. A step has a few (the gradient
// sync, a receive per micro-batch under pipeline parallelism): room for four
// is made at the first.
func (st *StepTime) AddWait(iv Interval) {
	if st.Waits == nil {
		st.Waits = make([]Interval, 0, 4)
	}
	st.Waits = append(st.Waits, iv)
}

// Busy is the rank's busy time in the step (see the function Busy); it sorts
// Waits.
func (st *StepTime) Busy() int64 { return Busy(st.Start, st.End, st.Waits) }

// Busy is the step's duration minus the union of the wait intervals, each
// clipped to the step, so that nested or overlapping waits count once. It
// returns -1 when the step has no usable duration (end <= start). waits is
// sorted in place.
func Busy(start, end int64, waits []Interval) int64 {
	if end <= start {
		return -1
	}
	slices.SortFunc(waits, func(a, b Interval) int { return cmp.Compare(a.Start, b.Start) })
	var waited int64
	covered := start // everything before covered is counted already
	for _, w := range waits {
		lo, hi := max(w.Start, covered), min(w.End, end)
		if hi <= lo {
			continue
		}
		waited += hi - lo
		covered = hi
	}
	return end - start - waited
}

// RelativeScore is the fastest rank's busy time over this rank's, in (0, 1]:
// 1 for the fastest rank, 0.5 for a rank twice as slow. It is 1 when either
// time is unknown (<= 0), so that nothing unknown looks slow.
func RelativeScore(fastest, busy int64) float64 {
	return ratio(fastest, busy)
}

// IndividualScore is this rank's best recent busy time over its current one,
// in (0, 1]: 1 when the current step is as fast as the best recent one. It is
// 1 when either time is unknown.
func IndividualScore(best, busy int64) float64 {
	return ratio(best, busy)
}

func ratio(num, den int64) float64 {
	if num <= 0 || den <= 0 || num >= den {
		return 1
	}
	return float64(num) / float64(den)
}

// Round3 rounds a score to three decimals, the precision it is reported with.
func Round3(s float64) float64 { return math.Round(s*1000) / 1000 }
