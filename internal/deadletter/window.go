// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package deadletter // import "github.com/nemo-lens/otelcol-nemo/internal/deadletter"

import (
	"fmt"
	"sync"
	"time"
)

// Window is a destination's retry window: how long a request that keeps
// failing is retried before it is dead-lettered (retry_on_failure::
// max_elapsed_time, 0: forever).
//
// Why by hand: exporterhelper's retry sender drops a request when its
// max_elapsed_time runs out, with a log line and no hook. The exporters set
// the retry sender's window to 0 (it retries forever, keeping its backoff,
// the server's delays and the persistent queue's shutdown handling) and ask
// Window after each failure whether the request's own window ran out.
//
// A request is the same value on every retry of the retry sender (pdata's
// types compare by their pointers), or, when a push sent part of it, the
// remainder it handed back: Carry moves the first failure to that.
type Window[T comparable] struct {
	length time.Duration

	mu    sync.Mutex
	first map[T]time.Time
}

// NewWindow returns a window of length (0: requests are retried forever).
func NewWindow[T comparable](length time.Duration) *Window[T] {
	return &Window[T]{length: length, first: map[T]time.Time{}}
}

// Failed records that d failed at now and returns how long it has been
// failing, and whether that is past the window.
func (w *Window[T]) Failed(d T, now time.Time) (time.Duration, bool) {
	if w.length <= 0 {
		return 0, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	first, ok := w.first[d]
	if !ok {
		w.first[d] = now
		return 0, false
	}
	since := now.Sub(first)
	return since, since >= w.length
}

// Length is the window (0: none).
func (w *Window[T]) Length() time.Duration { return w.length }

// Carry gives rest, what is left of from after a partial send, from's first
// failure, and forgets from.
func (w *Window[T]) Carry(from, rest T) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if first, ok := w.first[from]; ok {
		delete(w.first, from)
		w.first[rest] = first
	}
}

// Forget ends d's window: it was delivered or dead-lettered.
func (w *Window[T]) Forget(d T) {
	w.mu.Lock()
	delete(w.first, d)
	w.mu.Unlock()
}

// WindowDetail is a letter's error for a request whose window ran out.
func WindowDetail(since, length time.Duration, last error) string {
	return fmt.Sprintf("still failing %s after the first attempt (retry_on_failure::max_elapsed_time %s): %v", since.Round(time.Second), length, last)
}
