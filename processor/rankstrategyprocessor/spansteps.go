// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor"

import (
	"encoding/binary"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
)

// spanKey names a span within one rank (owner) and trace. Span ids are only
// unique within a process: Megatron seeds the RNG alike on data-parallel
// ranks, and runs reuse ids.
type spanKey struct {
	owner uint64
	trace uint64
	span  pcommon.SpanID
}

func foldTraceID(id pcommon.TraceID) uint64 {
	return binary.LittleEndian.Uint64(id[:8]) ^ binary.LittleEndian.Uint64(id[8:])
}

// digest mixes the key into 64 bits. The span-to-step map is keyed by it:
// half the memory of the full key and a cheaper hash, on the map that every
// span goes through. Two live spans share a digest with a probability of
// about n^2 / 2^65 (1 in 10^8 for 400,000 entries); such a span would be
// tied to the other's step.
func (k spanKey) digest() uint64 {
	return mix64(k.owner ^ mix64(k.trace^mix64(binary.LittleEndian.Uint64(k.span[:]))))
}

// mix64 is the SplitMix64 finaliser: every input bit affects every output
// bit, so structured ids (counters, XOR-folded trace ids) spread evenly.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// spanSteps maps recently seen spans to their step's iteration, so that a
// span whose parent arrived earlier, maybe in another batch, finds its step.
// Two generations bound it: the current one is retired when it reaches limit
// entries or is one wait old (the longer of decision_wait and span_wait), so
// an entry lives between one and two waits and at most 2 x limit are kept. Lookups do not keep an entry alive.
type spanSteps struct {
	gen     *stepbusy.Generations[uint64, int64]
	started time.Duration
}

func newSpanSteps(limit int) spanSteps {
	return spanSteps{gen: stepbusy.NewGenerations[uint64, int64](limit)}
}

func (m *spanSteps) get(k spanKey) (int64, bool) { return m.gen.Peek(k.digest()) }

func (m *spanSteps) put(k spanKey, iteration int64) { m.gen.Put(k.digest(), iteration) }

// rotate retires the current generation by age. It sizes the next one as
// the retired one, which saves growing it again at a steady rate.
func (m *spanSteps) rotate(now time.Duration) {
	m.gen.Rotate(m.gen.CurrentLen())
	m.started = now
}

func (m *spanSteps) len() int { return m.gen.Len() }
