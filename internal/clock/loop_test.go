// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package clock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/nemo-lens/otelcol-nemo/internal/clock"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/clocktest"
)

func TestTickEvery(t *testing.T) {
	assert.Equal(t, time.Second, clock.TickEvery(10*time.Second))
	assert.Equal(t, 200*time.Millisecond, clock.TickEvery(2*time.Second))
	assert.Equal(t, 10*time.Millisecond, clock.TickEvery(time.Millisecond))
}

func TestLoopTicksUntilStopped(t *testing.T) {
	clk := clocktest.NewFake()
	ticks := 0
	l := clock.StartLoop(clk, time.Second, func() { ticks++ })
	clk.Advance(time.Second)
	assert.Equal(t, 1, ticks, "Advance returns after the tick is handled, and it ticks once")
	clk.Advance(time.Second)
	assert.Equal(t, 2, ticks, "every period ticks once: no tick runs after Advance returns")
	clk.Advance(3 * time.Second)
	assert.Equal(t, 3, ticks, "a ticker that missed periods fires once, as time.Ticker does")
	l.Stop()
	l.Stop()
	stopped := ticks
	clk.Advance(time.Second)
	assert.Equal(t, stopped, ticks, "no tick after Stop")
	var never *clock.Loop
	never.Stop()
}
