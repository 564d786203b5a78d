// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepbusy

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestGenerationsForgetUntouchedEntries(t *testing.T) {
	g := NewGenerations[int, string](2)
	g.Put(1, "a")
	g.Put(2, "b")
	g.Put(3, "c") // (1, 2) retire
	v, ok := g.Get(1)
	assert.True(t, ok, "back from the previous generation")
	assert.Equal(t, "a", v)
	g.Put(1, "a2") // in the current generation: replaced, nothing retires
	g.Put(4, "d")  // (3, 1) retire, 2 is forgotten
	_, ok = g.Get(2)
	assert.False(t, ok)
	assert.LessOrEqual(t, g.Len(), 4)
	seen := map[int]string{}
	g.All(func(k int, v string) { seen[k] = v })
	assert.Equal(t, map[int]string{1: "a2", 3: "c", 4: "d"}, seen)
}

func TestGenerationsPeekAndRotate(t *testing.T) {
	g := NewGenerations[int, int](4)
	g.Put(1, 10)
	g.Rotate(8)
	v, ok := g.Peek(1)
	assert.True(t, ok, "a rotation keeps the last generation")
	assert.Equal(t, 10, v)
	g.Rotate(0)
	_, ok = g.Peek(1)
	assert.False(t, ok, "peeking does not keep an entry")
	assert.Zero(t, g.Len())
	assert.Equal(t, 4, g.Limit())
	g.Put(2, 20)
	assert.Equal(t, 1, g.CurrentLen())
}
