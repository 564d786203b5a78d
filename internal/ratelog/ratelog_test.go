// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package ratelog

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestAllowOncePerIntervalPerKey(t *testing.T) {
	l := Limiter[string]{Every: time.Minute}
	t0 := time.Unix(1000, 0)
	assert.True(t, l.Allow("a", t0), "the first message of a key goes through")
	assert.False(t, l.Allow("a", t0.Add(59*time.Second)), "within the interval")
	assert.True(t, l.Allow("b", t0.Add(time.Second)), "keys are limited independently")
	assert.True(t, l.Allow("a", t0.Add(time.Minute)), "due again after the interval")
	assert.False(t, l.Allow("a", t0.Add(time.Minute+time.Second)))
}

func TestMaxKeysAndSweep(t *testing.T) {
	l := Limiter[string]{Every: time.Hour, MaxKeys: 2}
	t0 := time.Unix(1000, 0)
	assert.True(t, l.Allow("a", t0))
	assert.True(t, l.Allow("b", t0.Add(time.Minute)))
	assert.False(t, l.Allow("c", t0.Add(2*time.Minute)), "at the bound a new key is not let through")

	l.Sweep(t0.Add(time.Hour))
	assert.True(t, l.Allow("c", t0.Add(time.Hour)), "the sweep forgot a, whose hour passed")
	assert.False(t, l.Allow("b", t0.Add(time.Hour)), "b's hour has not passed: the sweep kept it")
}

func TestCloneOnlyWhenRemembered(t *testing.T) {
	clones := 0
	l := Limiter[string]{Every: time.Minute, Clone: func(s string) string { clones++; return strings.Clone(s) }}
	t0 := time.Unix(1000, 0)
	l.Allow("a", t0)
	l.Allow("a", t0.Add(time.Second))
	assert.Equal(t, 1, clones, "a suppressed message does not clone its key")
}

func TestAllowNCountsTheOccurrencesBetweenMessages(t *testing.T) {
	l := Limiter[struct{}]{Every: time.Minute}
	t0 := time.Unix(1000, 0)
	total, ok := l.AllowN(struct{}{}, t0, 5)
	assert.True(t, ok)
	assert.Equal(t, int64(5), total, "the first message counts its own occurrences")
	for i := range 3 {
		_, ok = l.AllowN(struct{}{}, t0.Add(time.Duration(i+1)*time.Second), 10)
		assert.False(t, ok)
	}
	total, ok = l.AllowN(struct{}{}, t0.Add(time.Minute), 2)
	assert.True(t, ok)
	assert.Equal(t, int64(32), total, "the suppressed occurrences and this one")
	_, ok = l.AllowN(struct{}{}, t0.Add(time.Minute+time.Second), 1)
	assert.False(t, ok, "counted afresh after a message")
}

func TestOncePerKeyWithAnEndlessInterval(t *testing.T) {
	l := Limiter[string]{Every: Never, MaxKeys: 2}
	t0 := time.Unix(1000, 0)
	assert.True(t, l.Allow("a", t0))
	assert.False(t, l.Allow("a", t0.Add(24*time.Hour)), "once per key")
	assert.True(t, l.Allow("b", t0))
	assert.False(t, l.Allow("c", t0), "no more than MaxKeys keys")
}
