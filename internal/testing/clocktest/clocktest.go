// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package clocktest provides a fake clock.Clock for tests of the components
// that decide on a ticker, so that a test moves time itself and sees each
// tick's effects without sleeping.
package clocktest // import "github.com/nemo-lens/otelcol-nemo/internal/testing/clocktest"

import (
	"sync"
	"time"

	"github.com/nemo-lens/otelcol-nemo/internal/clock"
)

// Fake is a clock that moves only when told to. Advance fires every due
// ticker and returns only after the goroutine reading the ticker has handled
// the tick, so a test observes the tick's effects without sleeping.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	tickers []*fakeTicker
}

var _ clock.Clock = (*Fake)(nil)

// NewFake returns a Fake whose time is 2025-06-15 12:00 UTC.
func NewFake() *Fake {
	return &Fake{now: time.Date(2025, 6, 15, 12, 0, 0, 0, time.UTC)}
}

// Now returns the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTicker returns a ticker that fires when Advance reaches its next period.
func (c *Fake) NewTicker(every time.Duration) clock.Ticker {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTicker{c: make(chan time.Time), every: every, next: c.now.Add(every), handled: make(chan struct{}), stopped: make(chan struct{})}
	c.tickers = append(c.tickers, t)
	return t
}

// Advance moves the clock by d and fires the tickers that are due, once each
// (a ticker that missed several periods fires once, as time.Ticker does).
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	now := c.now
	var due []*fakeTicker
	for _, t := range c.tickers {
		if !now.Before(t.next) {
			for !now.Before(t.next) {
				t.next = t.next.Add(t.every)
			}
			due = append(due, t)
		}
	}
	c.mu.Unlock()
	for _, t := range due {
		t.fire(now)
	}
}

type fakeTicker struct {
	c        chan time.Time
	every    time.Duration
	next     time.Time
	handled  chan struct{}
	stopOnce sync.Once
	stopped  chan struct{}
}

func (t *fakeTicker) C() <-chan time.Time { return t.c }

func (t *fakeTicker) Stop() { t.stopOnce.Do(func() { close(t.stopped) }) }

// fire delivers now and returns once the reader (clock.Loop) has handled
// the tick, so that its effects are there when Advance returns and it does
// not run concurrently with what the test does next.
func (t *fakeTicker) fire(now time.Time) {
	select {
	case t.c <- now:
	case <-t.stopped:
		return
	}
	select {
	case <-t.handled:
	case <-t.stopped:
	}
}

// Handled is called by clock.Loop when it has handled a tick.
func (t *fakeTicker) Handled() {
	select {
	case t.handled <- struct{}{}:
	case <-t.stopped:
	}
}
