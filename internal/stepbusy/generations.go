// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepbusy // import "github.com/nemo-lens/otelcol-nemo/internal/stepbusy"

// Generations is a map that keeps at most about 2 x limit entries without a
// sweep: when the current generation reaches limit entries it becomes the
// previous one, and entries not touched for a whole generation are
// forgotten. It bounds per-rank and per-run state (History, Timeline and the
// components' own). Not safe for concurrent use.
type Generations[K comparable, V any] struct {
	limit     int
	cur, prev map[K]V
}

// NewGenerations keeps about 2 x limit entries; limit is at least 1.
func NewGenerations[K comparable, V any](limit int) *Generations[K, V] {
	return &Generations[K, V]{limit: max(limit, 1), cur: make(map[K]V), prev: make(map[K]V)}
}

// Get returns the entry of k, moving it to the current generation.
func (g *Generations[K, V]) Get(k K) (V, bool) {
	if v, ok := g.cur[k]; ok {
		return v, true
	}
	v, ok := g.prev[k]
	if ok {
		delete(g.prev, k)
		g.insert(k, v)
	}
	return v, ok
}

// Peek returns the entry of k without touching it: an entry only peeked
// at is forgotten in its turn.
func (g *Generations[K, V]) Peek(k K) (V, bool) {
	if v, ok := g.cur[k]; ok {
		return v, true
	}
	v, ok := g.prev[k]
	return v, ok
}

// Put sets the entry of k in the current generation. It costs one map
// write while the current generation has room.
func (g *Generations[K, V]) Put(k K, v V) {
	if len(g.cur) >= g.limit {
		if _, ok := g.cur[k]; !ok {
			g.Rotate(0)
		}
	}
	g.cur[k] = v
}

// insert adds an entry that is not in the current generation.
func (g *Generations[K, V]) insert(k K, v V) {
	if len(g.cur) >= g.limit {
		g.Rotate(0)
	}
	g.cur[k] = v
}

// Rotate retires the current generation now, forgetting the previous one,
// as when the current one is full; a caller that also retires generations
// by age calls it, with the size the next one is likely to reach.
func (g *Generations[K, V]) Rotate(sizeHint int) {
	g.prev, g.cur = g.cur, make(map[K]V, min(max(sizeHint, 0), g.limit))
}

// All calls fn for every entry, in no particular order.
func (g *Generations[K, V]) All(fn func(K, V)) {
	for k, v := range g.prev {
		fn(k, v)
	}
	for k, v := range g.cur {
		fn(k, v)
	}
}

// CurrentLen is the number of entries in the current generation.
func (g *Generations[K, V]) CurrentLen() int { return len(g.cur) }

// Limit is the size at which the current generation is retired.
func (g *Generations[K, V]) Limit() int { return g.limit }

// Len is the number of entries remembered.
func (g *Generations[K, V]) Len() int { return len(g.cur) + len(g.prev) }
