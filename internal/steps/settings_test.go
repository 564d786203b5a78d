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

func TestChecksReportEachKind(t *testing.T) {
	s := DefaultSettings()
	s.StepSpanNames = []string{"megatron.train_step", " "}
	s.IterationAttribute = ""
	s.WaitSpans = []string{"*"}
	s.RelativeThreshold = 1.5
	s.IndividualThreshold = -1
	s.History = 0
	err := s.Check()
	for _, kind := range []error{ErrEmptyKey, ErrNoIterationAttribute, ErrMatchesEverySpan, ErrScoreRange, ErrHistory} {
		require.ErrorIs(t, err, kind)
	}
	s.StepSpanNames = nil
	require.ErrorIs(t, s.Check(), ErrNoStepSpanNames)

	w := Waits{DecisionWait: 0, SpanWait: -time.Second}
	err = w.Check()
	require.ErrorIs(t, err, ErrDecisionWait)
	require.ErrorIs(t, err, ErrNegativeSpanWait)
	w = Waits{DecisionWait: time.Second, SpanWait: 3 * time.Second}
	require.NoError(t, w.Check())
	assert.Equal(t, 3*time.Second, w.Span())

	k := Keys{GroupKeys: []string{"a", ""}}
	err = k.Check(Need{Rank: true, WorldSize: true})
	require.ErrorIs(t, err, ErrNoKeys)
	require.ErrorIs(t, err, ErrEmptyKey)
	k = Keys{RankKeys: []string{"r"}, WorldSizeKeys: []string{"w"}}
	require.NoError(t, k.Check(Need{Rank: true, WorldSize: true}), "local_rank_keys and group_keys may be empty when not needed")
}

// The kinds whose message is built from the key it is about: the text names
// that key (and the list entry), and says what fixes it.
func TestCheckMessagesNameTheKeyAndTheFix(t *testing.T) {
	s := DefaultSettings()
	s.IndividualThreshold = 1.5
	require.EqualError(t, s.Check(), "individual_threshold must be a score in [0,1] (the fastest time over this rank's; 0 switches it off), got 1.5")
	require.EqualError(t, CheckKeys("world_size_keys", nil, true), "world_size_keys must list at least one attribute key, e.g. [nv.dl.world_size, dl.world_size]")
	require.EqualError(t, CheckKeys("group_keys", []string{"a", " "}, false), "group_keys[1] must not be empty; remove the entry")
}
