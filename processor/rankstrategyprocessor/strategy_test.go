// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor

import (
	"crypto/md5" //nolint:gosec // the reference algorithm
	"encoding/hex"
	"math"
	"math/big"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"
)

// pythonBucket is the library expression transcribed literally with math/big:
// int(md5(str(r)).hexdigest(), 16) % 10000.
func pythonBucket(rank int64) int {
	sum := md5.Sum([]byte(strconv.FormatInt(rank, 10))) //nolint:gosec // reference algorithm
	n, ok := new(big.Int).SetString(hex.EncodeToString(sum[:]), 16)
	if !ok {
		panic("bad hex")
	}
	return int(new(big.Int).Mod(n, big.NewInt(10000)).Int64())
}

func TestRankBucketMatchesLensBuckets(t *testing.T) {
	v := loadLensVectors(t)
	require.NotEmpty(t, v.Buckets)
	for rankText, want := range v.Buckets {
		rank, err := strconv.ParseInt(rankText, 10, 64)
		require.NoError(t, err)
		assert.Equal(t, want, rankBucket(rank), "rank %d", rank)
	}
	for rank := range int64(70000) {
		if got, want := rankBucket(rank), pythonBucket(rank); got != want {
			t.Fatalf("rankBucket(%d) = %d, Python expression gives %d", rank, got, want)
		}
	}
}

func TestSampledMatchesLensVectors(t *testing.T) {
	v := loadLensVectors(t)
	for _, c := range v.Cases {
		t.Run(strconv.FormatFloat(c.Rate, 'g', -1, 64), func(t *testing.T) {
			want := make(map[int64]bool, len(c.Kept))
			for _, r := range c.Kept {
				want[r] = true
			}
			s := newSampledRanks(c.Rate)
			// Twice: the first pass fills the memo, the second reads it.
			for pass := range 2 {
				for r := c.RanksChecked[0]; r <= c.RanksChecked[1]; r++ {
					require.Equal(t, want[r], s.keep(r), "pass %d rank %d rate %v", pass, r, c.Rate)
				}
			}
		})
	}
}

// The float comparison `b / 10000.0 < rate` is reproduced by a bucket cutoff;
// check it at every bucket boundary and just around it.
func TestBucketCutoffMatchesFloatComparison(t *testing.T) {
	rates := []float64{0, 1, 0.1, 0.01, 0.25, 0.5, 0.9, 0.3, 0.7, 0.07, 0.123456, 1e-9, 0.99999}
	for b := range 10001 {
		x := float64(b) / 10000.0
		rates = append(rates, x, math.Nextafter(x, 2), math.Nextafter(x, -1))
	}
	for _, rate := range rates {
		if rate < 0 || rate > 1 {
			continue
		}
		cutoff := bucketCutoff(rate)
		for b := range 10000 {
			if want, got := float64(b)/10000.0 < rate, b < cutoff; want != got {
				t.Fatalf("rate %v bucket %d: float comparison %v, cutoff %v", rate, b, want, got)
			}
		}
	}
}

func TestSampledBeyondMemo(t *testing.T) {
	v := loadLensVectors(t)
	s := newSampledRanks(0.5)
	for rankText, bucket := range v.Buckets {
		rank, err := strconv.ParseInt(rankText, 10, 64)
		require.NoError(t, err)
		assert.Equal(t, float64(bucket)/10000.0 < 0.5, s.keep(rank), "rank %d", rank)
	}
}

func TestSampledMemoIsSafeForConcurrentUse(t *testing.T) {
	s := newSampledRanks(0.1)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Go(func() {
			for r := range int64(5000) {
				if s.keep(r) != (pythonBucket(r) < 1000) {
					errs <- strconv.FormatInt(r, 10)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for r := range errs {
		t.Errorf("wrong decision for rank %s under concurrency", r)
	}
}

func TestRankList(t *testing.T) {
	l, err := parseRankList(" 64-71, 0,7 ,70-75, 76, 5-5")
	require.NoError(t, err)
	assert.Equal(t, rankList{{0, 0}, {5, 5}, {7, 7}, {64, 76}}, l)
	for r := range int64(100) {
		want := r == 0 || r == 5 || r == 7 || (r >= 64 && r <= 76)
		assert.Equal(t, want, l.contains(r), "rank %d", r)
	}

	for _, bad := range []string{"", "a", "1,", "-3", "3-", "4-2", "1.5", "0x10", "1-2-3"} {
		_, err := parseRankList(bad)
		assert.Error(t, err, bad)
	}
}

func selectorFor(t *testing.T, edit func(*Config)) *rankSelector {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	if edit != nil {
		edit(cfg)
	}
	require.NoError(t, cfg.Validate())
	s, err := newRankSelector(cfg, zap.NewNop())
	require.NoError(t, err)
	return s
}

func attrsOf(kv ...any) pcommon.Map {
	m := pcommon.NewMap()
	for i := 0; i < len(kv); i += 2 {
		k := kv[i].(string)
		switch v := kv[i+1].(type) {
		case int:
			m.PutInt(k, int64(v))
		case string:
			m.PutStr(k, v)
		case float64:
			m.PutDouble(k, v)
		case bool:
			m.PutBool(k, v)
		}
	}
	return m
}

func TestDecide(t *testing.T) {
	singleLast := func(*Config) {}
	singleZero := func(c *Config) { c.ExportRank = 0 }
	perNode := func(c *Config) { c.Strategy = StrategyFirstRankPerNode }
	dropMissing := func(c *Config) { c.OnMissingRank = MissingRankDrop }
	tests := []struct {
		name  string
		edit  func(*Config)
		attrs pcommon.Map
		want  verdict
	}{
		{"last rank, int", singleLast, attrsOf("nv.dl.rank", 7, "nv.dl.world_size", 8), verdict{keep: true, reason: reasonSelected}},
		{"last rank, strings, old keys", singleLast, attrsOf("dl.rank", "7", "dl.world_size", "8"), verdict{keep: true, reason: reasonSelected}},
		{"not last rank", singleLast, attrsOf("dl.rank", 6, "dl.world_size", 8), verdict{keep: false, reason: reasonNotSelected}},
		{"rank and world size in different spellings", singleLast, attrsOf("nv.dl.rank", 3, "dl.world_size", "4"), verdict{keep: true, reason: reasonSelected}},
		{"no world size", singleLast, attrsOf("dl.rank", 7), verdict{keep: true, reason: reasonMissingWorldSize}},
		{"no world size, drop", func(c *Config) { dropMissing(c) }, attrsOf("dl.rank", 7), verdict{keep: false, reason: reasonMissingWorldSize}},
		{"world size zero", singleLast, attrsOf("dl.rank", 0, "dl.world_size", 0), verdict{keep: true, reason: reasonMissingWorldSize}},
		{"export rank 0", singleZero, attrsOf("dl.rank", "0"), verdict{keep: true, reason: reasonSelected}},
		{"export rank 0, other rank", singleZero, attrsOf("dl.rank", 1), verdict{keep: false, reason: reasonNotSelected}},
		{"no rank", singleZero, attrsOf("service.name", "otelcol"), verdict{keep: true, reason: reasonMissingRank}},
		{"no rank, drop", func(c *Config) { singleZero(c); dropMissing(c) }, attrsOf("service.name", "otelcol"), verdict{keep: false, reason: reasonMissingRank}},
		{"garbage rank", singleZero, attrsOf("nv.dl.rank", "three"), verdict{keep: true, reason: reasonInvalidRank}},
		{"float rank, drop", func(c *Config) { singleZero(c); dropMissing(c) }, attrsOf("nv.dl.rank", 1.0), verdict{keep: false, reason: reasonInvalidRank}},
		{"all ranks", func(c *Config) { c.Strategy = StrategyAllRanks }, attrsOf("dl.rank", "123"), verdict{keep: true, reason: reasonSelected}},
		{"all ranks, no rank, drop", func(c *Config) { c.Strategy = StrategyAllRanks; dropMissing(c) }, attrsOf(), verdict{keep: false, reason: reasonMissingRank}},
		{"local rank 0", perNode, attrsOf("nv.dl.local_rank", "0", "nv.dl.rank", 16), verdict{keep: true, reason: reasonSelected}},
		{"local rank 3", perNode, attrsOf("dl.local_rank", 3, "dl.rank", 3), verdict{keep: false, reason: reasonNotSelected}},
		{"local rank without rank", perNode, attrsOf("dl.local_rank", 0), verdict{keep: true, reason: reasonSelected}},
		{"no local rank", perNode, attrsOf("dl.rank", 0), verdict{keep: true, reason: reasonMissingLocalRank}},
		{"garbage local rank, drop", func(c *Config) { perNode(c); dropMissing(c) }, attrsOf("dl.local_rank", true), verdict{keep: false, reason: reasonInvalidRank}},
		{"ranks list hit", func(c *Config) { c.Strategy = StrategyRanks; c.Ranks = "0,7,64-71" }, attrsOf("dl.rank", "65"), verdict{keep: true, reason: reasonSelected}},
		{"ranks list miss", func(c *Config) { c.Strategy = StrategyRanks; c.Ranks = "0,7,64-71" }, attrsOf("dl.rank", 72), verdict{keep: false, reason: reasonNotSelected}},
		{"custom keys", func(c *Config) { c.ExportRank = 2; c.RankKeys = []string{"my.rank"} }, attrsOf("my.rank", "2", "dl.rank", 5), verdict{keep: true, reason: reasonSelected}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, decision(selectorFor(t, tt.edit).decide(tt.attrs)))
		})
	}
}

// A resource without a world size takes the world size its run and worker
// group's last rank reported, and only that group's.
func TestWorldSizeRememberedPerGroup(t *testing.T) {
	s := selectorFor(t, nil)
	policy := func(kv ...any) pcommon.Map {
		return attrsOf(append([]any{"nemo.run.id", "a", "rl.worker_group", "policy"}, kv...)...)
	}
	// Nothing known yet.
	assert.Equal(t, verdict{keep: true, reason: reasonMissingWorldSize}, decision(s.decide(policy("dl.rank", 7))))
	// Ranks other than the last do not teach the world size...
	assert.Equal(t, verdict{keep: false, reason: reasonNotSelected}, decision(s.decide(policy("dl.rank", 0, "dl.world_size", 8))))
	assert.Equal(t, verdict{keep: true, reason: reasonMissingWorldSize}, decision(s.decide(policy("dl.rank", 7))))
	// ...the last rank does.
	assert.Equal(t, verdict{keep: true, reason: reasonSelected}, decision(s.decide(policy("nv.dl.rank", "7", "nv.dl.world_size", "8"))))
	assert.Equal(t, verdict{keep: true, reason: reasonSelected}, decision(s.decide(policy("dl.rank", 7))))
	assert.Equal(t, verdict{keep: false, reason: reasonNotSelected}, decision(s.decide(policy("dl.rank", 1))))
	// An unusable world size is no world size.
	assert.Equal(t, verdict{keep: false, reason: reasonNotSelected}, decision(s.decide(policy("dl.rank", 1, "dl.world_size", "eight"))))

	assert.Equal(t, verdict{keep: true, reason: reasonSelected},
		decision(s.decide(attrsOf("nemo.run.id", "a", "rl.worker_group", "generation", "dl.rank", 1, "dl.world_size", "2"))))
	assert.Equal(t, verdict{keep: true, reason: reasonSelected}, decision(s.decide(attrsOf("nemo.run.id", "a", "rl.worker_group", "generation", "dl.rank", 1))))
	assert.Equal(t, verdict{keep: false, reason: reasonNotSelected}, decision(s.decide(attrsOf("nemo.run.id", "a", "rl.worker_group", "generation", "dl.rank", 7))))
	// Another run, or no worker group, is another group.
	assert.Equal(t, verdict{keep: true, reason: reasonMissingWorldSize}, decision(s.decide(attrsOf("nemo.run.id", "b", "rl.worker_group", "policy", "dl.rank", 7))))
	assert.Equal(t, verdict{keep: true, reason: reasonMissingWorldSize}, decision(s.decide(attrsOf("nemo.run.id", "a", "dl.rank", 7))))
	// A group id sent as an int is the same group as its decimal string.
	s.decide(attrsOf("nemo.run.id", "c", "rl.worker_group", 3, "dl.rank", 3, "dl.world_size", 4))
	assert.Equal(t, verdict{keep: true, reason: reasonSelected}, decision(s.decide(attrsOf("nemo.run.id", "c", "rl.worker_group", "3", "dl.rank", 3))))
	// A restart with more ranks: the new last rank replaces the world size.
	s.decide(policy("dl.rank", 15, "dl.world_size", 16))
	assert.Equal(t, verdict{keep: true, reason: reasonSelected}, decision(s.decide(policy("dl.rank", 15))))
	assert.Equal(t, verdict{keep: false, reason: reasonNotSelected}, decision(s.decide(policy("dl.rank", 7))))
}

func TestWorldSizeMemoryIsBounded(t *testing.T) {
	s := selectorFor(t, nil)
	for i := range maxRememberedGroups + 100 {
		s.decide(attrsOf("nemo.run.id", "run-"+strconv.Itoa(i), "dl.rank", 3, "dl.world_size", 4))
	}
	assert.Len(t, s.worldSizes, maxRememberedGroups)
}

func TestDecideDoesNotAllocate(t *testing.T) {
	for name, edit := range map[string]func(*Config){
		"single_rank last": nil,
		"sampled":          func(c *Config) { c.Strategy = StrategySampled; c.SampleRate = 0.1 },
		"ranks":            func(c *Config) { c.Strategy = StrategyRanks; c.Ranks = "0,7,64-71" },
		"per node":         func(c *Config) { c.Strategy = StrategyFirstRankPerNode },
	} {
		s := selectorFor(t, edit)
		attrs := attrsOf("nemo.run.id", "a", "rl.worker_group", 2, "dl.rank", "7", "dl.world_size", "8", "dl.local_rank", "7")
		beyondMemo := attrsOf("nemo.run.id", "a", "dl.rank", 1000000, "dl.world_size", 2000000, "dl.local_rank", 0)
		assert.Zero(t, testing.AllocsPerRun(100, func() {
			s.decide(attrs)
			s.decide(beyondMemo)
		}), name)
	}
}

// decision is what a verdict decides: keep or drop, and why.
func decision(v verdict) verdict { return verdict{keep: v.keep, reason: v.reason} }
