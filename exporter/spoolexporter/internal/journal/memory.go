// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package journal // import "github.com/nemo-lens/otelcol-nemo/exporter/spoolexporter/internal/journal"

import "sync/atomic"

// Memory bounds the payload bytes of the records journals keep in memory
// until they are read; journals may share one. A nil Memory keeps none.
type Memory struct {
	limit int64
	used  atomic.Int64
}

// NewMemory returns a Memory of limit bytes.
func NewMemory(limit int64) *Memory { return &Memory{limit: limit} }

// take reserves n bytes, false (nothing reserved) past the limit.
func (m *Memory) take(n int64) bool {
	if m == nil {
		return false
	}
	if m.used.Add(n) <= m.limit {
		return true
	}
	m.used.Add(-n)
	return false
}

// give returns n bytes taken.
func (m *Memory) give(n int64) { m.used.Add(-n) }
