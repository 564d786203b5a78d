// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package clock // import "github.com/nemo-lens/otelcol-nemo/internal/clock"

import "time"

// TickEvery is how often a component that decides within wait looks at
// what it holds: a tenth of wait, between 10ms and 1s, so that a decision
// due comes at most a tenth late.
func TickEvery(wait time.Duration) time.Duration {
	return min(max(wait/10, 10*time.Millisecond), time.Second)
}

// Loop calls a function at every tick of a ticker, on a goroutine of its
// own, until Stop.
type Loop struct {
	ticker     Ticker
	stop, done chan struct{}
}

// StartLoop starts calling tick every period of clk's ticker.
func StartLoop(clk Clock, every time.Duration, tick func()) *Loop {
	l := &Loop{ticker: clk.NewTicker(every), stop: make(chan struct{}), done: make(chan struct{})}
	go l.run(tick)
	return l
}

// handledTicker is a ticker that is told when each tick it delivered has
// been handled: a fake clock's, so that a test that moves time goes on only
// once the tick's effects are there, and no tick runs behind its back.
type handledTicker interface {
	Handled()
}

func (l *Loop) run(tick func()) {
	defer close(l.done)
	for {
		select {
		case <-l.stop:
			return
		case <-l.ticker.C():
			tick()
			if h, ok := l.ticker.(handledTicker); ok {
				h.Handled()
			}
		}
	}
}

// Stop ends the loop, waiting for a tick in progress, and stops the ticker.
// It may be called on a nil Loop (never started) and more than once.
func (l *Loop) Stop() {
	if l == nil || l.stop == nil {
		return
	}
	close(l.stop)
	<-l.done
	l.ticker.Stop()
	l.stop = nil
}
