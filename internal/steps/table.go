// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package steps // import "github.com/nemo-lens/otelcol-nemo/internal/steps"

import "time"

// Cause says why a step is decided when it is.
type Cause uint8

const (
	// Complete: every rank of the world reported.
	Complete Cause = iota
	// AtWait: decision_wait is over.
	AtWait
	// Early: the component's memory budget was reached.
	Early
	// AtShutdown: the collector stops.
	AtShutdown
	// NumCauses sizes arrays indexed by Cause.
	NumCauses
)

// Open is a step whose ranks are still reporting, with what the component
// keeps of it (V).
type Open[K comparable, V any] struct {
	Key     K
	Created time.Duration
	// WorldSize is the largest world size the step's ranks reported, 0 when
	// none did.
	WorldSize int64
	Value     V

	// complete: decided at the next tick. decided: out of the table, skipped
	// when the queue reaches it.
	complete, decided bool
}

// Decided reports whether the step was decided (it is out of the table).
func (o *Open[K, V]) Decided() bool { return o.decided }

// Table holds the open steps: a step opens at its first step span, and is
// decided at the next tick once every rank of its world reported, at the
// latest decision_wait after it opened, or earlier when the component runs
// out of room (oldest first). Not safe for concurrent use.
type Table[K comparable, V any] struct {
	wait     time.Duration
	open     map[K]*Open[K, V]
	queue    []*Open[K, V] // open steps, oldest first; decided ones are skipped
	complete []*Open[K, V] // open steps every rank reported, decided at the next tick
	// last is the step last looked up: the spans of a batch mostly belong
	// to one step.
	last *Open[K, V]
}

// NewTable keeps a step open for at most wait.
func NewTable[K comparable, V any](wait time.Duration) *Table[K, V] {
	return &Table[K, V]{wait: wait, open: make(map[K]*Open[K, V])}
}

// Get is the open step of key, nil when none.
func (t *Table[K, V]) Get(key K) *Open[K, V] {
	if o := t.last; o != nil && o.Key == key && !o.decided {
		return o
	}
	o := t.open[key]
	if o != nil {
		t.last = o
	}
	return o
}

// Open opens the step of key at now; it must not be open.
func (t *Table[K, V]) Open(key K, now time.Duration, v V) *Open[K, V] {
	o := &Open[K, V]{Key: key, Created: now, Value: v}
	t.open[key] = o
	t.queue = append(t.queue, o)
	t.last = o
	return o
}

// Report notes that the step's ranks reported a world of worldSize (0:
// unknown) and that reported of them have reported; the step is complete
// once all have.
func (t *Table[K, V]) Report(o *Open[K, V], worldSize, reported int64) {
	o.WorldSize = max(o.WorldSize, worldSize)
	if o.WorldSize > 0 && reported >= o.WorldSize {
		t.MarkComplete(o)
	}
}

// MarkComplete has the step decided at the next tick.
func (t *Table[K, V]) MarkComplete(o *Open[K, V]) {
	if !o.complete {
		o.complete = true
		t.complete = append(t.complete, o)
	}
}

// Oldest is the oldest open step, nil when there is none.
func (t *Table[K, V]) Oldest() *Open[K, V] {
	for len(t.queue) > 0 && t.queue[0].decided {
		t.pop()
	}
	if len(t.queue) == 0 {
		return nil
	}
	return t.queue[0]
}

func (t *Table[K, V]) pop() *Open[K, V] {
	o := t.queue[0]
	t.queue[0] = nil
	t.queue = t.queue[1:]
	return o
}

// take removes a step from the table and hands it to decide.
func (t *Table[K, V]) take(o *Open[K, V], cause Cause, decide func(*Open[K, V], Cause)) {
	delete(t.open, o.Key)
	o.decided = true
	if t.last == o {
		t.last = nil
	}
	decide(o, cause)
}

// Due hands out, at a tick, the complete steps and then the steps open for
// decision_wait by now, oldest first.
func (t *Table[K, V]) Due(now time.Duration, decide func(*Open[K, V], Cause)) {
	for _, o := range t.complete {
		if !o.decided {
			t.take(o, Complete, decide)
		}
	}
	clear(t.complete)
	t.complete = t.complete[:0]
	for o := t.Oldest(); o != nil && o.Created+t.wait <= now; o = t.Oldest() {
		t.take(t.pop(), AtWait, decide)
	}
}

// DecideOldest hands out the oldest open step, decided early; false when
// there is none.
func (t *Table[K, V]) DecideOldest(decide func(*Open[K, V], Cause)) bool {
	if t.Oldest() == nil {
		return false
	}
	t.take(t.pop(), Early, decide)
	return true
}

// Drain hands out every open step, oldest first, at shutdown.
func (t *Table[K, V]) Drain(decide func(*Open[K, V], Cause)) {
	for o := t.Oldest(); o != nil; o = t.Oldest() {
		t.take(t.pop(), AtShutdown, decide)
	}
	t.complete = nil
}

// Decided remembers the last size decided steps, first in first out, so
// that what arrives after a step's decision follows it. Not safe for
// concurrent use.
type Decided[K comparable, D any] struct {
	size  int
	steps map[K]D
	ring  []K
	next  int
}

// NewDecided remembers size (at least 1) decided steps.
func NewDecided[K comparable, D any](size int) *Decided[K, D] {
	size = max(size, 1)
	return &Decided[K, D]{size: size, steps: make(map[K]D, min(size, 1<<14)), ring: make([]K, 0, min(size, 1<<14))}
}

// Get is the decision of key; false when it is not remembered.
func (d *Decided[K, D]) Get(key K) (D, bool) {
	v, ok := d.steps[key]
	return v, ok
}

// Put remembers a decision, forgetting the oldest when full; a step decided
// again keeps its place.
func (d *Decided[K, D]) Put(key K, v D) {
	if _, ok := d.steps[key]; ok {
		d.steps[key] = v
		return
	}
	if len(d.ring) < d.size {
		d.ring = append(d.ring, key)
	} else {
		delete(d.steps, d.ring[d.next])
		d.ring[d.next] = key
		d.next = (d.next + 1) % d.size
	}
	d.steps[key] = v
}
