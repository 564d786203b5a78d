// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/confmap"

	"github.com/nemo-lens/otelcol-nemo/internal/steps"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/configtest"
	"github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor/internal/metadata"
)

func TestLoadConfig(t *testing.T) {
	withDefaults := func(edit func(*Config)) *Config {
		cfg := createDefaultConfig().(*Config)
		edit(cfg)
		return cfg
	}
	tests := []struct {
		id      component.ID
		want    *Config
		wantErr []error
		// wantMsg: an error of mapstructure's, not of this processor.
		wantMsg string
	}{
		{id: component.NewID(metadata.Type), want: withDefaults(func(*Config) {})},
		{id: component.NewIDWithName(metadata.Type, "sampled"), want: withDefaults(func(c *Config) {
			c.Strategy = StrategySampled
			c.SampleRate = 0.1
		})},
		{id: component.NewIDWithName(metadata.Type, "ranks"), want: withDefaults(func(c *Config) {
			c.Strategy = StrategyRanks
			c.Ranks = "0, 7, 64-71"
		})},
		// A bare YAML number is not a string; a value from ${env:...} is
		// kept as written, so only literal YAML needs the quotes.
		{id: component.NewIDWithName(metadata.Type, "one_rank_as_int"), wantMsg: "'ranks' expected type 'string', got unconvertible type 'int'"},
		{id: component.NewIDWithName(metadata.Type, "full"), want: withDefaults(func(c *Config) {
			c.Strategy = StrategySingleRank
			c.ExportRank = 0
			c.SampleRate = 0.25
			c.Ranks = "1-3"
			c.RankKeys = []string{"my.rank"}
			c.WorldSizeKeys = []string{"my.world_size"}
			c.LocalRankKeys = []string{"my.local_rank"}
			c.GroupKeys = []string{"slurm.job.id"}
			c.OnMissingRank = MissingRankDrop
			c.KeepErrors = false
			c.KeepLogSeverity = "warn"
		})},
		{id: component.NewIDWithName(metadata.Type, "first_rank_per_node_without_rank_keys"), want: withDefaults(func(c *Config) {
			c.Strategy = StrategyFirstRankPerNode
			c.RankKeys = []string{}
		})},
		{id: component.NewIDWithName(metadata.Type, "bad_strategy"), wantErr: []error{errUnknownStrategy}},
		{id: component.NewIDWithName(metadata.Type, "bad_sample_rate"), wantErr: []error{errSampleRate}},
		{id: component.NewIDWithName(metadata.Type, "bad_export_rank"), wantErr: []error{errExportRank}},
		{id: component.NewIDWithName(metadata.Type, "bad_range"), wantErr: []error{errRangeBackwards}},
		{id: component.NewIDWithName(metadata.Type, "bad_rank_entry"), wantErr: []error{errEmptyRankEntry}},
		{id: component.NewIDWithName(metadata.Type, "ranks_missing"), wantErr: []error{errNoRanks}},
		{id: component.NewIDWithName(metadata.Type, "bad_on_missing_rank"), wantErr: []error{errOnMissingRank}},
		{id: component.NewIDWithName(metadata.Type, "bad_severity"), wantErr: []error{errSeverity}},
		{id: component.NewIDWithName(metadata.Type, "no_rank_keys"), wantErr: []error{steps.ErrNoKeys}},
		{id: component.NewIDWithName(metadata.Type, "no_world_size_keys"), wantErr: []error{steps.ErrNoKeys}},
		{id: component.NewIDWithName(metadata.Type, "empty_group_key"), wantErr: []error{steps.ErrEmptyKey}},
		// The block's presence enables it with the defaults; enabled: false
		// disables it whatever else it says.
		{id: component.NewIDWithName(metadata.Type, "stragglers_present"), want: withDefaults(func(c *Config) {
			c.Stragglers = configoptional.Some(defaultStragglersConfig())
		})},
		{id: component.NewIDWithName(metadata.Type, "stragglers_enabled_flag"), want: withDefaults(func(c *Config) {
			sc := defaultStragglersConfig()
			sc.RelativeThreshold = 0.5
			c.Stragglers = configoptional.Some(sc)
		})},
		{id: component.NewIDWithName(metadata.Type, "stragglers_disabled"), want: withDefaults(func(c *Config) {
			c.Stragglers = configoptional.None[StragglersConfig]()
		})},
		{id: component.NewIDWithName(metadata.Type, "stragglers_full"), want: withDefaults(func(c *Config) {
			c.Strategy = StrategySampled
			c.SampleRate = 0.01
			c.Stragglers = configoptional.Some(StragglersConfig{
				Waits: steps.Waits{DecisionWait: 30 * time.Second},
				Settings: steps.Settings{
					Spans: steps.Spans{StepSpanNames: []string{"nemo_rl.train_step"}, IterationAttribute: "nemo_rl.step"},
					Scoring: steps.Scoring{
						WaitSpans:           []string{"nemo_rl.wait_for_peers", "torch.distributed.*"},
						RelativeThreshold:   0.6,
						IndividualThreshold: 0,
						History:             50,
					},
				},
				MaxRanksPerStep:   8,
				MaxBufferedSpans:  500_000,
				DecisionCacheSize: 2048,
				Summarize:         true,
				ProgressInterval:  2 * time.Second,
			})
		})},
		{id: component.NewIDWithName(metadata.Type, "stragglers_removed_threshold"), wantErr: []error{errThresholdRemoved}},
		{id: component.NewIDWithName(metadata.Type, "stragglers_old_step_span_name"), wantErr: []error{errStepSpanNameReplaced}},
		{id: component.NewIDWithName(metadata.Type, "stragglers_bad_scores"), wantErr: []error{steps.ErrScoreRange, steps.ErrHistory}},
		{id: component.NewIDWithName(metadata.Type, "stragglers_bad_wait_spans"), wantErr: []error{steps.ErrStarNotAtEnd}},
		{id: component.NewIDWithName(metadata.Type, "stragglers_bad_wait"), wantErr: []error{steps.ErrDecisionWait}},
		{id: component.NewIDWithName(metadata.Type, "stragglers_bad_limits"), wantErr: []error{errMaxRanksPerStep, errMaxBufferedSpans, errDecisionCacheSize}},
		{id: component.NewIDWithName(metadata.Type, "stragglers_bad_progress_interval"), wantErr: []error{errProgressInterval}},
		{id: component.NewIDWithName(metadata.Type, "stragglers_bad_span_wait"), wantErr: []error{steps.ErrNegativeSpanWait}},
		{id: component.NewIDWithName(metadata.Type, "stragglers_empty_names"), wantErr: []error{steps.ErrNoStepSpanNames, steps.ErrNoIterationAttribute}},
		{id: component.NewIDWithName(metadata.Type, "stragglers_empty_name"), wantErr: []error{steps.ErrEmptyKey}},
	}
	for _, tt := range tests {
		t.Run(tt.id.String(), func(t *testing.T) {
			cfg := createDefaultConfig()
			err := configtest.Load(t, tt.id, cfg)
			if tt.wantMsg != "" {
				require.ErrorContains(t, err, tt.wantMsg)
				return
			}
			for _, want := range tt.wantErr {
				require.ErrorIs(t, err, want)
			}
			if tt.wantErr != nil {
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg)
		})
	}
}

func TestValidateReportsEveryBadKey(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.SampleRate = -0.5
	cfg.OnMissingRank = "maybe"
	err := cfg.Validate()
	require.ErrorIs(t, err, errSampleRate)
	require.ErrorIs(t, err, errOnMissingRank)
}

// The messages README.md quotes, and those of the two removed straggler keys,
// whose text is the fix.
func TestErrorMessagesNameTheKeyAndTheFix(t *testing.T) {
	for name, want := range map[string]string{
		"bad_sample_rate":               "sample_rate must be in [0,1], got 1.5",
		"bad_range":                     `ranks: range "9-3" ends before it starts`,
		"stragglers_removed_threshold":  "stragglers: threshold (a multiple of the median step duration, got 1.5) was removed: stragglers are now scored on busy time; set relative_threshold and individual_threshold (scores in [0,1], default 0.7) instead",
		"stragglers_old_step_span_name": `stragglers: step_span_name was replaced by step_span_names, a list: set step_span_names: ["megatron.train_step"]`,
	} {
		t.Run(name, func(t *testing.T) {
			require.EqualError(t, configtest.Load(t, component.NewIDWithName(metadata.Type, name), createDefaultConfig()), want)
		})
	}
}

func TestParseSeverity(t *testing.T) {
	tests := map[string]int32{
		"TRACE": 1, "debug": 5, "Info": 9, "WARN": 13, "WARNING": 13, "warn3": 15,
		"ERROR": 17, "error2": 18, " ERROR4 ": 20, "FATAL": 21, "CRITICAL": 21, "FATAL4": 24, //nolint:gocritic // mapKey: the spaces are deliberate, parseSeverity must trim them
	}
	for text, want := range tests {
		got, err := parseSeverity(text)
		require.NoError(t, err, text)
		assert.Equal(t, want, int32(got), text)
	}
	for _, bad := range []string{"", "ERR", "ERROR5", "ERROR1", "ERRORS", "7"} {
		_, err := parseSeverity(bad)
		assert.Error(t, err, bad)
	}
}

// mapEnvProvider resolves ${env:NAME:-default} from a map, the way the
// collector's env provider resolves it from the environment.
type mapEnvProvider map[string]string

func (m mapEnvProvider) Retrieve(_ context.Context, uri string, _ confmap.WatcherFunc) (*confmap.Retrieved, error) {
	name, def, hasDefault := strings.Cut(strings.TrimPrefix(uri, "env:"), ":-")
	val, ok := m[name]
	if !ok && hasDefault {
		if def == "" {
			return confmap.NewRetrieved("")
		}
		val = def
	}
	return confmap.NewRetrievedFromYAML([]byte(val))
}
func (mapEnvProvider) Scheme() string                 { return "env" }
func (mapEnvProvider) Shutdown(context.Context) error { return nil }

// presetProvider serves testdata/preset.yaml, the block a preset config
// uses, under the "preset" scheme.
type presetProvider struct{}

func (presetProvider) Retrieve(context.Context, string, confmap.WatcherFunc) (*confmap.Retrieved, error) {
	raw, err := os.ReadFile(filepath.Join("testdata", "preset.yaml"))
	if err != nil {
		return nil, err
	}
	return confmap.NewRetrievedFromYAML(raw)
}
func (presetProvider) Scheme() string                 { return "preset" }
func (presetProvider) Shutdown(context.Context) error { return nil }

// The preset block works with no environment set and with every variable
// overridden, including a single rank given through NEMO_RANKS.
func TestPresetEnvOverrides(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want func(*Config)
	}{
		{"defaults", nil, func(*Config) {}},
		{"sampled", map[string]string{"NEMO_RANK_STRATEGY": "sampled", "NEMO_RANK_SAMPLE_RATE": "0.25"}, func(c *Config) {
			c.Strategy = StrategySampled
			c.SampleRate = 0.25
		}},
		{"one explicit rank", map[string]string{"NEMO_RANK_STRATEGY": "ranks", "NEMO_RANKS": "7"}, func(c *Config) {
			c.Strategy = StrategyRanks
			c.Ranks = "7"
		}},
		{"export rank 0", map[string]string{"NEMO_EXPORT_RANK": "0"}, func(c *Config) { c.ExportRank = 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := mapEnvProvider(tt.env)
			resolver, err := confmap.NewResolver(confmap.ResolverSettings{
				URIs: []string{"preset:rank_strategy"},
				ProviderFactories: []confmap.ProviderFactory{
					confmap.NewProviderFactory(func(confmap.ProviderSettings) confmap.Provider { return presetProvider{} }),
					confmap.NewProviderFactory(func(confmap.ProviderSettings) confmap.Provider { return env }),
				},
				DefaultScheme: "env",
			})
			require.NoError(t, err)
			conf, err := resolver.Resolve(t.Context())
			require.NoError(t, err)
			sub, err := conf.Sub("processors::rank_strategy")
			require.NoError(t, err)

			cfg := createDefaultConfig().(*Config)
			require.NoError(t, sub.Unmarshal(cfg))
			require.NoError(t, confmap.Validate(cfg))
			want := createDefaultConfig().(*Config)
			want.SampleRate = 0.1
			tt.want(want)
			assert.Equal(t, want, cfg)
		})
	}
}
