// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

func TestSpanStepsGenerations(t *testing.T) {
	m := newSpanSteps(2)
	k := func(n byte) spanKey { return spanKey{owner: 1, span: pcommon.SpanID{n}} }
	m.put(k(1), 10)
	it, ok := m.get(k(1))
	assert.True(t, ok)
	assert.Equal(t, int64(10), it)
	m.put(k(2), 20)
	m.put(k(3), 30) // the generation is full: it retires
	assert.Equal(t, 3, m.len())
	_, ok = m.get(k(2))
	assert.True(t, ok, "found in the previous generation")
	m.put(k(4), 40)
	m.put(k(5), 50) // retires again: k(1) and k(2) are forgotten
	_, ok = m.get(k(1))
	assert.False(t, ok)
	_, ok = m.get(k(2))
	assert.False(t, ok, "a lookup does not keep an entry")
	assert.LessOrEqual(t, m.len(), 4)

	m.rotate(time.Second)
	assert.Equal(t, time.Second, m.started)
	_, ok = m.get(k(5))
	assert.True(t, ok, "an age rotation keeps the last generation")
	m.rotate(2 * time.Second)
	assert.Zero(t, m.len())
}

func TestFoldTraceID(t *testing.T) {
	a := pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	b := pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17}
	assert.NotEqual(t, foldTraceID(a), foldTraceID(b))
	assert.Zero(t, foldTraceID(pcommon.TraceID{}))
}

// Structured ids (counters, as Megatron's seeded RNG and the tests make
// them) spread without collisions.
func TestSpanKeyDigestSpreads(t *testing.T) {
	seen := make(map[uint64]spanKey, 1<<18)
	for owner := range uint64(64) {
		for trace := range uint64(4) {
			for n := range uint64(1024) {
				k := spanKey{owner: owner, trace: trace, span: pcommon.SpanID{byte(n >> 8), byte(n), 0, 0, 0, 0, 0, 1}}
				d := k.digest()
				if prev, dup := seen[d]; dup {
					t.Fatalf("%v and %v share digest %x", prev, k, d)
				}
				seen[d] = k
			}
		}
	}
}
