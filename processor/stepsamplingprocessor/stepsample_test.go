// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepsamplingprocessor

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fractionVectors were computed with Python's hashlib from the function the
// README documents (testdata/step-fractions.json says how), not with this
// package: they pin the function for every other tool.
type fractionVectors struct {
	Cases []struct {
		RunID     string  `json:"run_id"`
		Iteration int64   `json:"iteration"`
		Fraction  float64 `json:"fraction"`
	} `json:"cases"`
	Kept map[string][]int64 `json:"kept_at_0.1_of_40"`
}

func loadFractionVectors(tb testing.TB) fractionVectors {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "step-fractions.json"))
	require.NoError(tb, err)
	var v fractionVectors
	require.NoError(tb, json.Unmarshal(raw, &v))
	require.NotEmpty(tb, v.Cases)
	require.NotEmpty(tb, v.Kept)
	return v
}

func TestStepFractionMatchesTheDocumentedFunction(t *testing.T) {
	v := loadFractionVectors(t)
	for _, c := range v.Cases {
		assert.Equal(t, c.Fraction, stepFraction(c.RunID, c.Iteration), "run %q iteration %d", c.RunID, c.Iteration)
	}
	for run, want := range v.Kept {
		s := newStepSampler(&Config{SampleRate: 0.1})
		var got []int64
		for it := range int64(40) {
			if s.keep(run, it) {
				got = append(got, it)
			}
		}
		assert.Equal(t, want, got, "run %q", run)
	}
}

func TestStepSamplerEvery(t *testing.T) {
	s := newStepSampler(&Config{SampleRate: 1, Every: 10})
	var got []int64
	for it := range int64(40) {
		if s.keep("any", it) {
			got = append(got, it)
		}
	}
	assert.Equal(t, []int64{0, 10, 20, 30}, got)
}

func TestStepSamplerEdges(t *testing.T) {
	all, none := newStepSampler(&Config{SampleRate: 1}), newStepSampler(&Config{SampleRate: 0})
	for it := range int64(1000) {
		require.True(t, all.keep("r", it))
		require.False(t, none.keep("r", it))
	}
	// The one-entry cache must not leak a decision across runs.
	s := newStepSampler(&Config{SampleRate: 0.5})
	for it := range int64(200) {
		for _, run := range []string{"a", "b"} {
			require.Equal(t, stepFraction(run, it) < 0.5, s.keep(run, it), "run %s iteration %d", run, it)
		}
	}
}

// TestStepFractionIsUniform draws the sample for many runs: the share of
// steps kept, and of consecutive steps both kept, must be within five
// standard deviations of the binomial expectation. Consecutive iterations
// differ only in their last digits; a hash that mixed them poorly would
// keep runs of neighbors together and fail the second check.
func TestStepFractionIsUniform(t *testing.T) {
	const runs, iterations = 2000, 100
	for _, rate := range []float64{0.01, 0.1, 0.5} {
		kept, pairs := 0, 0
		for r := range runs {
			run := fmt.Sprintf("%012x", r*7919)
			prev := false
			for it := range int64(iterations) {
				k := stepFraction(run, it) < rate
				if k {
					kept++
				}
				if k && prev {
					pairs++
				}
				prev = k
			}
		}
		within(t, "kept", kept, runs*iterations, rate)
		within(t, "consecutive pairs kept", pairs, runs*(iterations-1), rate*rate)
	}
}

func within(t *testing.T, what string, got, n int, p float64) {
	t.Helper()
	mean := float64(n) * p
	sd := math.Sqrt(float64(n) * p * (1 - p))
	assert.InDelta(t, mean, float64(got), 5*sd, "%s at p=%v: %d of %d", what, p, got, n)
}
