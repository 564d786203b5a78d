// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepsamplingprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor"

import (
	"github.com/nemo-lens/otelcol-nemo/internal/boundedmap"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// rememberedExceptions is how many of a rank's most recent steps kept for an
// error or as a straggler (outside the sample) are remembered.
const rememberedExceptions = 8

// keptExceptions is a ring of a rank's last steps kept outside the sample.
type keptExceptions struct {
	iterations [rememberedExceptions]int64
	reasons    [rememberedExceptions]keepReason
	n, next    int
}

// exceptionMemory remembers, per rank, the recent steps kept outside the
// sample, so that a span of such a step arriving after its step was decided
// is kept too. Steps in the sample need no memory: the sample is a function
// of the run id and the iteration. It keeps at most about 2 x limit ranks.
// Not safe for concurrent use.
type exceptionMemory struct {
	ranks *boundedmap.Map[steps.Rank, *keptExceptions]
}

func newExceptionMemory(limit int) *exceptionMemory {
	return &exceptionMemory{ranks: boundedmap.New[steps.Rank, *keptExceptions](limit)}
}

// lookup says whether the rank's step was kept outside the sample, and why.
func (m *exceptionMemory) lookup(rank steps.Rank, iteration int64) (keepReason, bool) {
	k, ok := m.ranks.Get(rank)
	if !ok {
		return 0, false
	}
	for i := range k.n {
		if k.iterations[i] == iteration {
			return k.reasons[i], true
		}
	}
	return 0, false
}

// remember notes that the rank's step was kept outside the sample.
func (m *exceptionMemory) remember(rank steps.Rank, iteration int64, r keepReason) {
	k := m.ranks.GetOrNew(rank, func() *keptExceptions { return &keptExceptions{} })
	for i := range k.n {
		if k.iterations[i] == iteration {
			return
		}
	}
	k.iterations[k.next], k.reasons[k.next] = iteration, r
	k.next = (k.next + 1) % rememberedExceptions
	k.n = min(k.n+1, rememberedExceptions)
}
