// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package steps

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaultsAreValid(t *testing.T) {
	s := DefaultSettings()
	require.NoError(t, s.Check())
	w := DefaultWaits()
	require.NoError(t, w.Check())
	assert.Equal(t, DefaultDecisionWait, w.Span(), "a span waits as long as a step by default")
	k := DefaultKeys()
	require.NoError(t, k.Check(Need{Rank: true, WorldSize: true, LocalRank: true}))
	k.RankKeys[0] = "changed"
	assert.Equal(t, "nv.dl.rank", DefaultKeys().RankKeys[0], "each config owns its lists")
}

func TestChecksNameTheKey(t *testing.T) {
	s := DefaultSettings()
	s.StepSpanNames = []string{"megatron.train_step", " "}
	s.IterationAttribute = ""
	s.WaitSpans = []string{"*"}
	s.RelativeThreshold = 1.5
	s.IndividualThreshold = -1
	s.History = 0
	err := s.Check()
	require.Error(t, err)
	for _, want := range []string{
		"step_span_names[1] must not be empty; remove the entry",
		"iteration_attribute must not be empty; the default is megatron.iteration",
		`wait_spans: entry 0 ("*") would match every span`,
		"relative_threshold must be a score in [0,1] (the fastest time over this rank's; 0 switches it off), got 1.5",
		"individual_threshold must be a score in [0,1]",
		"history must be at least 1 step, got 0",
	} {
		assert.Contains(t, err.Error(), want)
	}
	s.StepSpanNames = nil
	assert.ErrorContains(t, s.Check(), "step_span_names must list at least one span name")

	w := Waits{DecisionWait: 0, SpanWait: -time.Second}
	err = w.Check()
	assert.ErrorContains(t, err, "decision_wait must be positive (a step is decided at the latest this long after its first step span), got 0s")
	assert.ErrorContains(t, err, "span_wait must be positive, or 0 to wait as long as decision_wait, got -1s")
	w = Waits{DecisionWait: time.Second, SpanWait: 3 * time.Second}
	assert.Equal(t, 3*time.Second, w.Span())
	assert.ErrorContains(t, CheckSpanWait(0), "span_wait must be positive")

	k := Keys{GroupKeys: []string{"a", ""}}
	err = k.Check(Need{Rank: true, WorldSize: true})
	assert.ErrorContains(t, err, "rank_keys must list at least one attribute key, e.g. [nv.dl.rank, dl.rank]")
	assert.ErrorContains(t, err, "world_size_keys must list at least one attribute key")
	assert.NotContains(t, err.Error(), "local_rank_keys", "not needed")
	assert.ErrorContains(t, err, "group_keys[1] must not be empty")
}

func TestRenamedToSpanWait(t *testing.T) {
	require.NoError(t, RenamedToSpanWait(nil))
	assert.ErrorContains(t, RenamedToSpanWait("30s"), "was renamed span_wait; decision_wait now only means how long a step stays open: set span_wait: 30s")
}
