package rankstrategyprocessor

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nemo-lens/otelcol-nemo/internal/goldentest"
)

func TestGoldenTraces(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
	}{
		{
			// export_rank -1: the last rank of each run by its own world
			// size, whatever the key spelling and value type; a resource
			// without a rank is kept (on_missing_rank: keep).
			name: "single_rank",
		},
		{
			// md5 buckets of ranks 0..7: 7850, 8411, 9212, 883, 1900, 693,
			// 412, 5555; below 5000 are ranks 3, 4, 5 and 6.
			name: "sampled",
			edit: func(cfg *Config) {
				cfg.Strategy = StrategySampled
				cfg.SampleRate = 0.5
			},
		},
		{
			// Local rank 0 on each node (ranks 0 and 4); rank 8 has no
			// local rank and on_missing_rank drops it.
			name: "first_rank_per_node",
			edit: func(cfg *Config) {
				cfg.Strategy = StrategyFirstRankPerNode
				cfg.OnMissingRank = MissingRankDrop
			},
		},
		{
			// Rank 0 kept whole, unmarked; from rank 1 only the ERROR span
			// and the spans truncated as a bool or a string, marked.
			name: "keep_errors",
			edit: func(cfg *Config) { cfg.ExportRank = 0 },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			if tt.edit != nil {
				tt.edit(cfg)
			}
			require.NoError(t, cfg.Validate())
			goldentest.Traces(t, NewFactory(), cfg, filepath.Join("testdata", tt.name))
		})
	}
}
