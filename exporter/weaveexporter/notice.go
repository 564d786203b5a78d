package weaveexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/weaveexporter"

import (
	"sync"
	"time"
)

// throttledNotice lets a recurring warning through at most once per
// interval and counts the occurrences in between, so that a misconfigured
// job sending thousands of batches produces one line a minute, not one per
// batch.
type throttledNotice struct {
	interval time.Duration

	mu   sync.Mutex
	next time.Time
	held int64
}

// record adds n occurrences at now. It returns true, with the occurrences
// since the last message (n included), when a message is due.
func (t *throttledNotice) record(now time.Time, n int64) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.held += n
	if now.Before(t.next) {
		return 0, false
	}
	total := t.held
	t.held = 0
	t.next = now.Add(t.interval)
	return total, true
}

// onceSet remembers up to limit distinct values, for messages worth logging
// once per value (which key was renamed to what).
type onceSet[T comparable] struct {
	limit int

	mu   sync.Mutex
	seen map[T]struct{}
}

// first reports whether v was not seen before; once limit values are held it
// reports false for everything new.
func (o *onceSet[T]) first(v T) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.seen[v]; ok || len(o.seen) >= o.limit {
		return false
	}
	if o.seen == nil {
		o.seen = make(map[T]struct{})
	}
	o.seen[v] = struct{}{}
	return true
}
