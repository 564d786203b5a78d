// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package steps

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type decision struct {
	key   int
	cause Cause
}

func collect(got *[]decision) func(*Open[int, string], Cause) {
	return func(o *Open[int, string], c Cause) {
		*got = append(*got, decision{o.Key, c})
	}
}

func TestTableCompleteWhenEveryRankReported(t *testing.T) {
	tab := NewTable[int, string](10 * time.Second)
	o := tab.Open(1, 0, "one")
	tab.Report(o, 2, 1)
	var got []decision
	tab.Due(time.Second, collect(&got))
	assert.Empty(t, got, "one rank of two")
	tab.Report(o, 0, 2)
	assert.Same(t, o, tab.Get(1))
	tab.Due(time.Second, collect(&got))
	assert.Equal(t, []decision{{1, Complete}}, got)
	assert.True(t, o.Decided())
	assert.Nil(t, tab.Get(1), "a decided step is out of the table")
	assert.Nil(t, tab.Oldest(), "and the table is empty")
}

func TestTableExpiresAtDecisionWait(t *testing.T) {
	tab := NewTable[int, string](10 * time.Second)
	tab.Open(1, 0, "")
	tab.Open(2, 5*time.Second, "")
	tab.Report(tab.Get(2), 1, 1) // complete, decided out of order
	var got []decision
	tab.Due(9*time.Second, collect(&got))
	assert.Equal(t, []decision{{2, Complete}}, got)
	tab.Open(3, 9*time.Second, "")
	tab.Due(10*time.Second, collect(&got))
	assert.Equal(t, []decision{{2, Complete}, {1, AtWait}}, got, "step 2, decided already, is skipped")
	tab.Due(19*time.Second, collect(&got))
	assert.Equal(t, decision{3, AtWait}, got[len(got)-1])
	assert.Nil(t, tab.Oldest())
}

func TestTableDecidesOldestEarlyAndDrains(t *testing.T) {
	tab := NewTable[int, string](time.Hour)
	for k := range 3 {
		tab.Open(k, time.Duration(k), "")
	}
	var got []decision
	require.True(t, tab.DecideOldest(collect(&got)))
	assert.Equal(t, []decision{{0, Early}}, got)
	assert.Equal(t, 1, tab.Oldest().Key)
	tab.Drain(collect(&got))
	assert.Equal(t, []decision{{0, Early}, {1, AtShutdown}, {2, AtShutdown}}, got)
	assert.False(t, tab.DecideOldest(collect(&got)), "nothing left")
}

func TestTableReopensADecidedStep(t *testing.T) {
	tab := NewTable[int, string](time.Second)
	tab.Open(1, 0, "first")
	var got []decision
	tab.Due(time.Second, collect(&got))
	o := tab.Open(1, 2*time.Second, "late rank")
	assert.Same(t, o, tab.Get(1))
	assert.Equal(t, "late rank", o.Value)
}

func TestDecidedForgetsOldestFirst(t *testing.T) {
	d := NewDecided[int, string](2)
	d.Put(1, "a")
	d.Put(2, "b")
	d.Put(1, "a2") // decided again: keeps its place
	v, ok := d.Get(1)
	assert.True(t, ok)
	assert.Equal(t, "a2", v)
	d.Put(3, "c")
	_, ok = d.Get(1)
	assert.False(t, ok, "the oldest is forgotten")
	_, ok = d.Get(2)
	assert.True(t, ok)
	_, ok = d.Get(3)
	assert.True(t, ok)
}
