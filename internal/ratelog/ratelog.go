// Package ratelog keeps a recurring log message from flooding the log: a
// misconfigured sender repeats its mistake in every batch, and one line per
// interval says as much as one per batch.
package ratelog // import "github.com/nemo-lens/otelcol-nemo/internal/ratelog"

import (
	"sync"
	"time"
)

// Limiter lets a message through at most once per Every for each key (a
// message without variants uses one key, e.g. struct{}{}). The zero value,
// with Every set, is ready to use and safe for concurrent use.
type Limiter[K comparable] struct {
	// Every is the shortest time between two messages of one key.
	Every time.Duration
	// MaxKeys bounds the keys remembered; at the bound no further message
	// is let through until Sweep frees room. 0: no bound.
	MaxKeys int
	// Clone, when set, copies a key before it is remembered, so that a key
	// made from memory the caller reuses (strings into a request) stays
	// valid. Keys that are not let through are never cloned.
	Clone func(K) K

	mu   sync.Mutex
	last map[K]time.Time
}

// Allow reports whether the message of key is due at now, and if so
// remembers now as the time it was last let through.
func (l *Limiter[K]) Allow(key K, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if last, ok := l.last[key]; ok && now.Sub(last) < l.Every {
		return false
	}
	if l.MaxKeys > 0 && len(l.last) >= l.MaxKeys {
		return false
	}
	if l.last == nil {
		l.last = make(map[K]time.Time)
	}
	if l.Clone != nil {
		key = l.Clone(key)
	}
	l.last[key] = now
	return true
}

// Sweep forgets the keys whose message is due again at now, so that keys
// seen once do not stay remembered.
func (l *Limiter[K]) Sweep(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, last := range l.last {
		if now.Sub(last) >= l.Every {
			delete(l.last, k)
		}
	}
}
