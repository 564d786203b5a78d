// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepsamplingprocessor

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/goldentest"
)

func TestGoldenTraces(t *testing.T) {
	// Both cases are two ranks of run job-7f3a9c1e2b4d (rank 0 as an int
	// nv.dl.rank, rank 1 as a string dl.rank with a string iteration),
	// iterations 9 to 12, each a step span with three children, in one
	// batch. README: at sample_rate 0.1 the run keeps iterations 10 and 11
	// of 9 to 12.
	tests := []struct {
		name string
		edit func(*Config)
	}{
		{
			// Iterations 10 and 11 kept whole on both ranks, marked
			// sampled_step; 9 and 12 dropped.
			name: "sample_rate",
			edit: func(cfg *Config) { cfg.SampleRate = 0.1 },
		},
		{
			// As sample_rate, and rank 1's iteration 12, which has an
			// ERROR child, kept whole and marked error; rank 0's
			// iteration 12 is still dropped.
			name: "error_step",
			edit: func(cfg *Config) { cfg.SampleRate = 0.1 },
		},
		{
			// sample_rate's job in the other Megatron shape: steps named
			// megatron.train.iteration, each a child of the run-long
			// megatron.pretrain span in one trace: the same iterations
			// are kept.
			name: "train_iteration_in_job",
			edit: func(cfg *Config) { cfg.SampleRate = 0.1 },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			tt.edit(cfg)
			require.NoError(t, cfg.Validate())
			goldentest.Traces(t, NewFactory(), cfg, filepath.Join("testdata", tt.name))
		})
	}
}
