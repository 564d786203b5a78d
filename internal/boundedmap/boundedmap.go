// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package boundedmap is a map that forgets what is not used: the per-rank
// and per-run state of the step components, bounded without a sweep.
package boundedmap // import "github.com/nemo-lens/otelcol-nemo/internal/boundedmap"

// Map keeps at most about 2 x limit entries without a sweep: when the
// current generation reaches limit entries it becomes the previous one, and
// entries not touched for a whole generation are forgotten. Not safe for
// concurrent use.
type Map[K comparable, V any] struct {
	limit     int
	cur, prev map[K]V
}

// New keeps about 2 x limit entries; limit is at least 1.
func New[K comparable, V any](limit int) *Map[K, V] {
	return &Map[K, V]{limit: max(limit, 1), cur: make(map[K]V), prev: make(map[K]V)}
}

// Get returns the entry of k, moving it to the current generation.
func (m *Map[K, V]) Get(k K) (V, bool) {
	if v, ok := m.cur[k]; ok {
		return v, true
	}
	v, ok := m.prev[k]
	if ok {
		delete(m.prev, k)
		m.insert(k, v)
	}
	return v, ok
}

// GetOrNew returns the entry of k, creating it with create when there is
// none.
func (m *Map[K, V]) GetOrNew(k K, create func() V) V {
	v, ok := m.Get(k)
	if !ok {
		v = create()
		m.insert(k, v)
	}
	return v
}

// Put sets the entry of k in the current generation.
func (m *Map[K, V]) Put(k K, v V) {
	if _, ok := m.cur[k]; ok {
		m.cur[k] = v
		return
	}
	m.insert(k, v)
}

// insert adds k, not in the current generation, retiring the current
// generation first when it is full.
func (m *Map[K, V]) insert(k K, v V) {
	if len(m.cur) >= m.limit {
		m.prev, m.cur = m.cur, make(map[K]V)
	}
	m.cur[k] = v
}

// Delete forgets k.
func (m *Map[K, V]) Delete(k K) {
	delete(m.cur, k)
	delete(m.prev, k)
}

// All calls fn for every entry, the previous generation first.
func (m *Map[K, V]) All(fn func(K, V)) {
	for k, v := range m.prev {
		fn(k, v)
	}
	for k, v := range m.cur {
		fn(k, v)
	}
}

// Len is the number of entries in both generations.
func (m *Map[K, V]) Len() int { return len(m.cur) + len(m.prev) }
