package nemostepsconnector // import "github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector"

// generations is a map that keeps at most about 2 x limit entries, the way
// stepbusy.History and stepbusy.Timeline bound their ranks: when the current
// generation reaches limit entries it becomes the previous one, and entries
// not touched for a whole generation are forgotten. It bounds per-rank and
// per-run state without a sweep. Not safe for concurrent use.
type generations[K comparable, V any] struct {
	limit     int
	cur, prev map[K]V
}

func newGenerations[K comparable, V any](limit int) *generations[K, V] {
	return &generations[K, V]{limit: max(limit, 1), cur: make(map[K]V), prev: make(map[K]V)}
}

// get returns the entry of k, moving it to the current generation.
func (g *generations[K, V]) get(k K) (V, bool) {
	if v, ok := g.cur[k]; ok {
		return v, true
	}
	v, ok := g.prev[k]
	if ok {
		delete(g.prev, k)
		g.put(k, v)
	}
	return v, ok
}

// put sets the entry of k in the current generation.
func (g *generations[K, V]) put(k K, v V) {
	if _, ok := g.cur[k]; !ok && len(g.cur) >= g.limit {
		g.prev, g.cur = g.cur, make(map[K]V, g.limit)
	}
	g.cur[k] = v
}

// each calls fn for every entry, in no particular order.
func (g *generations[K, V]) each(fn func(K, V)) {
	for k, v := range g.prev {
		fn(k, v)
	}
	for k, v := range g.cur {
		fn(k, v)
	}
}

func (g *generations[K, V]) len() int { return len(g.cur) + len(g.prev) }
