// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package clock is the time source of the components that decide on a
// ticker: rank_strategy's straggler buffer, step_sampling's held spans, the
// nemo_steps connector and nemo_run's single-node grouping. They take a
// Clock rather than calling time.Now and time.NewTicker, so that the
// collector runs them on the wall clock while tests drive the ticker
// themselves (see internal/testing/clocktest) and observe decisions without
// sleeping.
package clock // import "github.com/nemo-lens/otelcol-nemo/internal/clock"

import "time"

// Clock tells the time and makes tickers. Wall returns the one the
// collector uses; clocktest.Fake is the one tests use.
type Clock interface {
	Now() time.Time
	NewTicker(every time.Duration) Ticker
}

// Ticker delivers the times at which a component looks at what it holds:
// steps to decide, held spans to pass on, intervals to flush.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// Wall returns the wall clock: time.Now and time.NewTicker.
func Wall() Clock { return wallClock{} }

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) NewTicker(every time.Duration) Ticker {
	return wallTicker{time.NewTicker(every)}
}

type wallTicker struct{ t *time.Ticker }

func (w wallTicker) C() <-chan time.Time { return w.t.C }
func (w wallTicker) Stop()               { w.t.Stop() }
