// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package ratelog keeps a recurring log message from flooding the log: a
// misconfigured sender repeats its mistake in every batch, and one line per
// interval says as much as one per batch.
package ratelog // import "github.com/nemo-lens/otelcol-nemo/internal/ratelog"

import (
	"math"
	"sync"
	"time"
)

// Never as a Limiter's Every lets each key's message through once (a
// message worth logging once per value).
const Never = time.Duration(math.MaxInt64)

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
	last map[K]*entry
}

// entry is what a Limiter remembers of one key: when its message was last
// let through, and the occurrences AllowN counted since.
type entry struct {
	at   time.Time
	held int64
}

// Allow reports whether the message of key is due at now, and if so
// remembers now as the time it was last let through.
func (l *Limiter[K]) Allow(key K, now time.Time) bool {
	_, ok := l.AllowN(key, now, 0)
	return ok
}

// AllowN is Allow for a message that says how often its cause happened: it
// adds n occurrences of key at now and, when the message is due, returns
// the occurrences since the last message of key was let through (n
// included). Occurrences of a key that is not remembered (MaxKeys reached)
// are not counted.
func (l *Limiter[K]) AllowN(key K, now time.Time, n int64) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.last[key]; ok {
		if now.Sub(e.at) < l.Every {
			e.held += n
			return 0, false
		}
		total := e.held + n
		e.at, e.held = now, 0
		return total, true
	}
	if l.MaxKeys > 0 && len(l.last) >= l.MaxKeys {
		return 0, false
	}
	if l.last == nil {
		l.last = make(map[K]*entry)
	}
	if l.Clone != nil {
		key = l.Clone(key)
	}
	l.last[key] = &entry{at: now}
	return n, true
}

// Sweep forgets the keys whose message is due again at now, so that keys
// seen once do not stay remembered.
func (l *Limiter[K]) Sweep(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, e := range l.last {
		if now.Sub(e.at) >= l.Every {
			delete(l.last, k)
		}
	}
}
