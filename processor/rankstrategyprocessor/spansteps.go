package rankstrategyprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor"

import (
	"encoding/binary"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
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

// spanSteps maps recently seen spans to their step's iteration, so that a
// span whose parent arrived earlier, maybe in another batch, finds its step.
// Two generations bound it: the current one is retired when it reaches limit
// entries or is one decision_wait old, so an entry lives between one and two
// waits and at most 2 x limit are kept.
type spanSteps struct {
	cur, prev map[spanKey]int64
	limit     int
	started   time.Duration
}

func newSpanSteps(limit int) spanSteps {
	return spanSteps{cur: make(map[spanKey]int64), prev: make(map[spanKey]int64), limit: limit}
}

func (m *spanSteps) get(k spanKey) (int64, bool) {
	if it, ok := m.cur[k]; ok {
		return it, true
	}
	it, ok := m.prev[k]
	return it, ok
}

func (m *spanSteps) put(k spanKey, iteration int64, now time.Duration) {
	m.cur[k] = iteration
	if len(m.cur) >= m.limit {
		m.rotate(now, 0)
	}
}

// rotate retires the current generation. A generation retired by age sizes
// the next one, which saves growing it again at a steady rate.
func (m *spanSteps) rotate(now time.Duration, sizeHint int) {
	m.prev = m.cur
	m.cur = make(map[spanKey]int64, min(sizeHint, m.limit))
	m.started = now
}

func (m *spanSteps) len() int { return len(m.cur) + len(m.prev) }
