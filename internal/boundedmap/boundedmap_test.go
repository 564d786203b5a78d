// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package boundedmap

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestForgetsUntouchedEntries(t *testing.T) {
	m := New[int, string](2)
	m.Put(1, "a")
	m.Put(2, "b")
	m.Put(3, "c") // (1, 2) retire
	v, ok := m.Get(1)
	assert.True(t, ok, "back from the previous generation")
	assert.Equal(t, "a", v)
	m.Put(1, "a2") // in the current generation: replaced, nothing retires
	m.Put(4, "d")  // (3, 1) retire, 2 is forgotten
	_, ok = m.Get(2)
	assert.False(t, ok)
	assert.LessOrEqual(t, m.Len(), 4)
	seen := map[int]string{}
	m.All(func(k int, v string) { seen[k] = v })
	assert.Equal(t, map[int]string{1: "a2", 3: "c", 4: "d"}, seen)
}

func TestGetOrNewAndDelete(t *testing.T) {
	m := New[int, *int](4)
	made := 0
	create := func() *int { made++; return new(int) }
	a := m.GetOrNew(1, create)
	*a = 7
	assert.Equal(t, 7, *m.GetOrNew(1, create), "an existing entry is returned")
	assert.Equal(t, 1, made)
	m.Delete(1)
	_, ok := m.Get(1)
	assert.False(t, ok)
	assert.Zero(t, m.Len())
}
