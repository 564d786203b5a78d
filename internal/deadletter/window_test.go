// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package deadletter

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestWindowFollowsARequestAndItsRemainder(t *testing.T) {
	w := NewWindow[*int](time.Minute)
	d, rest := new(int), new(int)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	_, over := w.Failed(d, t0)
	assert.False(t, over, "the first failure opens the window")
	_, over = w.Failed(d, t0.Add(59*time.Second))
	assert.False(t, over)

	// What a partial send left keeps d's first failure.
	w.Carry(d, rest)
	since, over := w.Failed(rest, t0.Add(time.Minute))
	assert.True(t, over)
	assert.Equal(t, time.Minute, since)

	// d is gone: a new failure of it opens a new window.
	_, over = w.Failed(d, t0.Add(2*time.Minute))
	assert.False(t, over)
	w.Forget(d)
	w.Forget(rest)
	assert.Empty(t, w.first)

	assert.Equal(t, "still failing 1m0s after the first attempt (retry_on_failure::max_elapsed_time 1m0s): 503",
		WindowDetail(time.Minute, w.Length(), errors.New("503")))
}

func TestNoWindowRetriesForever(t *testing.T) {
	w := NewWindow[*int](0)
	d := new(int)
	_, over := w.Failed(d, time.Now())
	assert.False(t, over)
	_, over = w.Failed(d, time.Now().Add(24*time.Hour))
	assert.False(t, over)
	assert.Empty(t, w.first, "nothing to remember")
}
