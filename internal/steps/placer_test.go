// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package steps

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
)

func TestRecognizer(t *testing.T) {
	r, err := NewRecognizer(DefaultSpans(), stepbusy.DefaultWaitSpans())
	require.NoError(t, err)
	assert.True(t, r.IsStep("megatron.train_step"))
	assert.True(t, r.IsStep("megatron.train.iteration"))
	assert.False(t, r.IsStep("megatron.forward_backward"))
	assert.True(t, r.IsWait("megatron.grad_sync.start"))
	assert.False(t, r.IsWait("megatron.p2p.send_forward"))

	s := ptrace.NewSpan()
	_, ok := r.Iteration(s)
	assert.False(t, ok, "no iteration")
	s.Attributes().PutStr("megatron.iteration", " 12 ")
	it, ok := r.Iteration(s)
	assert.True(t, ok)
	assert.Equal(t, int64(12), it, "a decimal string counts")
	s.Attributes().PutDouble("megatron.iteration", 1.5)
	_, ok = r.Iteration(s)
	assert.False(t, ok)

	_, err = NewRecognizer(DefaultSpans(), []string{"a*b"})
	require.ErrorIs(t, err, stepbusy.ErrStarNotAtEnd)
}

func TestWaitingSpansResolveWithTheirStep(t *testing.T) {
	tl := stepbusy.NewTimeline[int](16)
	r := tl.Rank(1)
	var w Waiting[string]
	_, where := r.Place(150)
	require.Equal(t, stepbusy.Unknown, where)
	assert.Equal(t, 0, w.Add("grad_sync", 150, 0, -time.Hour, 8))
	assert.Equal(t, 0, w.Add("old", 50, 0, -time.Hour, 8))
	assert.Equal(t, 0, w.Add("next step", 250, 0, -time.Hour, 8))

	r.Add(7, 100, 200)
	assert.True(t, r.Seen(7, 100, 200))
	assert.False(t, r.Seen(8, 100, 200))
	assert.Same(t, r, tl.Rank(1), "one timeline per rank")
	placed, expired := Resolve(r, &w, -time.Hour, nil)
	assert.Equal(t, 0, expired)
	assert.Equal(t, []Placed[string]{{"grad_sync", 7, stepbusy.InStep}, {"old", 0, stepbusy.Outside}}, placed)
	assert.Equal(t, 1, w.Len(), "the next step's span keeps waiting")
	placed, expired = Resolve(r, &w, time.Second, placed[:0])
	assert.Empty(t, placed)
	assert.Equal(t, 1, expired)
	assert.Equal(t, 0, w.Len())
}

func TestWaitingIsBounded(t *testing.T) {
	var w Waiting[int]
	for i := range 5 {
		w.Add(i, 0, time.Duration(i), 0, 3)
	}
	assert.Equal(t, 3, w.Len(), "over the limit the oldest go")
	assert.Equal(t, 3, w.Add(9, 0, 10, 9, 3), "arrived before 9: expired")
	assert.Equal(t, 1, w.Clear())
}

// Where: a root that is not a step span (a job span) is in no step, any
// other span in the step span of its rank that covers its start.
func TestWhere(t *testing.T) {
	r := stepbusy.NewTimeline[int](16).Rank(1)
	r.Add(7, 100, 200)
	s := ptrace.NewSpan()
	s.SetStartTimestamp(150)
	_, where := Where(r, s)
	assert.Equal(t, stepbusy.Outside, where, "a trace root")
	s.SetParentSpanID([8]byte{1})
	it, where := Where(r, s)
	assert.Equal(t, stepbusy.InStep, where)
	assert.Equal(t, int64(7), it)
	s.SetStartTimestamp(250)
	_, where = Where(r, s)
	assert.Equal(t, stepbusy.Unknown, where, "its step span may still come")
}

func TestWaitingRemoveIfAndOldest(t *testing.T) {
	var w Waiting[string]
	_, ok := w.Oldest()
	assert.False(t, ok)
	w.Add("a", 10, 1, noExpiryForTest, 8)
	w.Add("b", 20, 2, noExpiryForTest, 8)
	w.Add("c", 30, 3, noExpiryForTest, 8)
	var gone []string
	n := w.RemoveIf(func(item string, start int64, arrived time.Duration) bool {
		if start == 20 || arrived == 1 {
			gone = append(gone, item)
			return true
		}
		return false
	})
	assert.Equal(t, 2, n)
	assert.Equal(t, []string{"a", "b"}, gone, "in arrival order")
	oldest, ok := w.Oldest()
	assert.True(t, ok)
	assert.Equal(t, time.Duration(3), oldest)
}

const noExpiryForTest = -time.Hour
