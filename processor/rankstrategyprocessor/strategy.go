// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor"

import (
	"fmt"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// reason says why items were kept or dropped. It is the `reason` attribute of
// the internal metrics and, for items kept by exception, the value of
// attrkey.KeptReason.
type reason uint8

const (
	reasonSelected reason = iota
	reasonNotSelected
	reasonError
	reasonTruncated
	reasonSeverity
	reasonMissingRank
	reasonInvalidRank
	reasonMissingWorldSize
	reasonMissingLocalRank
	reasonStraggler
	numReasons
)

var reasonNames = [numReasons]string{
	reasonSelected:         "selected",
	reasonNotSelected:      "not_selected",
	reasonError:            attrkey.KeptError,
	reasonTruncated:        attrkey.KeptTruncated,
	reasonSeverity:         attrkey.KeptSeverity,
	reasonMissingRank:      "missing_rank",
	reasonInvalidRank:      "invalid_rank",
	reasonMissingWorldSize: "missing_world_size",
	reasonMissingLocalRank: "missing_local_rank",
	reasonStraggler:        attrkey.KeptStraggler,
}

func (r reason) String() string { return reasonNames[r] }

// verdict is the decision for one resource.
type verdict struct {
	keep   bool
	reason reason
	// rank and worldSize are what decide read of the resource's identity:
	// rank when hasRank, worldSize when above 0.
	rank      int64
	worldSize int64
	hasRank   bool
}

// maxRememberedGroups bounds the per-group world-size memory. A collector sees
// few concurrent runs x worker groups; 4096 is far above that and the map
// stays around 200 KiB.
const maxRememberedGroups = 4096

// rankSelector applies a Strategy to one resource's rank identity. It is safe
// for concurrent use.
type rankSelector struct {
	strategy      Strategy
	exportRank    int64
	rankKeys      []string
	worldSizeKeys []string
	localRankKeys []string
	groupKeys     []string
	dropMissing   bool
	sampled       *sampledRanks
	ranks         rankList

	logger             *zap.Logger
	warnedWorldSize    atomic.Bool
	warnedInvalidValue atomic.Bool

	// reader hashes a resource's run and group (steps.Reader), for
	// worldSizes and for the straggler buffer, which reads ranks with it.
	reader *steps.Reader
	// worldSizes remembers, per run and group, the world size its last rank
	// reported, for single_rank with export_rank -1 on resources that carry
	// no world size themselves.
	mu         sync.RWMutex
	worldSizes map[uint64]int64
}

func newRankSelector(cfg *Config, logger *zap.Logger) (*rankSelector, error) {
	s := &rankSelector{
		strategy:      cfg.Strategy,
		exportRank:    cfg.ExportRank,
		rankKeys:      cfg.RankKeys,
		worldSizeKeys: cfg.WorldSizeKeys,
		localRankKeys: cfg.LocalRankKeys,
		groupKeys:     cfg.GroupKeys,
		dropMissing:   cfg.OnMissingRank == MissingRankDrop,
		logger:        logger,
		reader:        steps.NewReader(cfg.RankKeys, cfg.WorldSizeKeys, cfg.GroupKeys),
	}
	switch cfg.Strategy {
	case StrategySampled:
		s.sampled = newSampledRanks(cfg.SampleRate)
	case StrategyRanks:
		ranks, err := parseRankList(cfg.Ranks)
		if err != nil {
			return nil, fmt.Errorf("ranks: %w", err)
		}
		s.ranks = ranks
	case StrategySingleRank:
		if cfg.ExportRank == -1 {
			s.worldSizes = make(map[uint64]int64)
		}
	}
	return s, nil
}

// decide returns whether the resource with these attributes is kept. It reads
// only the resource, never its spans, metrics or logs, and does not allocate.
func (s *rankSelector) decide(attrs pcommon.Map) verdict {
	if s.strategy == StrategyFirstRankPerNode {
		local, key, status := rankattr.Lookup(attrs, s.localRankKeys)
		switch status {
		case rankattr.Missing:
			return s.unplaced(reasonMissingLocalRank)
		case rankattr.Invalid:
			s.warnInvalid(key, attrs)
			return s.unplaced(reasonInvalidRank)
		}
		return s.selected(local == 0)
	}

	rank, key, status := rankattr.Lookup(attrs, s.rankKeys)
	switch status {
	case rankattr.Missing:
		return s.unplaced(reasonMissingRank)
	case rankattr.Invalid:
		s.warnInvalid(key, attrs)
		return s.unplaced(reasonInvalidRank)
	}
	var v verdict
	switch s.strategy {
	case StrategyAllRanks:
		v = s.selected(true)
	case StrategySampled:
		v = s.selected(s.sampled.keep(rank))
	case StrategyRanks:
		v = s.selected(s.ranks.contains(rank))
	default: // StrategySingleRank
		if s.exportRank >= 0 {
			v = s.selected(rank == s.exportRank)
		} else {
			v = s.keepLastRank(rank, attrs)
		}
	}
	v.rank, v.hasRank = rank, true
	return v
}

// identity completes what decide read of a resource's identity into the
// step engine's: its run and group, its rank and world size. false: the
// resource has no usable rank.
func (s *rankSelector) identity(attrs pcommon.Map, v verdict) (steps.Identity, bool) {
	if !v.hasRank {
		id, status := s.reader.Read(attrs)
		return id, status == rankattr.Valid
	}
	id := steps.Identity{Rank: steps.Rank{Group: s.reader.Group(attrs), Rank: v.rank}, WorldSize: v.worldSize}
	if id.WorldSize == 0 {
		if size, _, status := rankattr.Lookup(attrs, s.worldSizeKeys); status == rankattr.Valid {
			id.WorldSize = size
		}
	}
	return id, true
}

func (s *rankSelector) keepLastRank(rank int64, attrs pcommon.Map) verdict {
	size, _, status := rankattr.Lookup(attrs, s.worldSizeKeys)
	if status == rankattr.Valid && size > 0 {
		last := rank == size-1
		if last {
			s.rememberWorldSize(s.groupHash(attrs), size)
		}
		v := s.selected(last)
		v.worldSize = size
		return v
	}
	s.mu.RLock()
	size, ok := s.worldSizes[s.groupHash(attrs)]
	s.mu.RUnlock()
	if !ok {
		s.warnMissingWorldSize()
		return s.unplaced(reasonMissingWorldSize)
	}
	return s.selected(rank == size-1)
}

func (*rankSelector) selected(keep bool) verdict {
	if keep {
		return verdict{keep: true, reason: reasonSelected}
	}
	return verdict{keep: false, reason: reasonNotSelected}
}

// unplaced is the verdict for a resource whose rank identity is unusable.
func (s *rankSelector) unplaced(r reason) verdict {
	return verdict{keep: !s.dropMissing, reason: r}
}

func (s *rankSelector) rememberWorldSize(group uint64, size int64) {
	s.mu.RLock()
	known, ok := s.worldSizes[group]
	s.mu.RUnlock()
	if ok && known == size {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.worldSizes[group]; !ok && len(s.worldSizes) >= maxRememberedGroups {
		// Forget an arbitrary group: old runs are the likeliest to be gone.
		for g := range s.worldSizes {
			delete(s.worldSizes, g)
			break
		}
	}
	s.worldSizes[group] = size
}

// groupHash identifies a resource's run and group by hashing its group
// attributes, without building a string key. The straggler buffer keys steps
// and ranks with the same reader.
func (s *rankSelector) groupHash(attrs pcommon.Map) uint64 { return s.reader.Group(attrs) }

func (s *rankSelector) warnMissingWorldSize() {
	if s.warnedWorldSize.CompareAndSwap(false, true) {
		action := MissingRankKeep
		if s.dropMissing {
			action = MissingRankDrop
		}
		s.logger.Warn("export_rank is -1 (the last rank, world size - 1) but a resource has no usable world-size attribute (world_size_keys) "+
			"and no world size is known for its run and group (group_keys); such resources are handled by on_missing_rank "+
			"and counted with reason missing_world_size; logged once",
			zap.Strings("world_size_keys", s.worldSizeKeys),
			zap.Strings("group_keys", s.groupKeys),
			zap.String("on_missing_rank", string(action)),
			zap.String("fix", "set one of world_size_keys on every rank, or set export_rank"))
	}
}

func (s *rankSelector) warnInvalid(key string, attrs pcommon.Map) {
	if s.warnedInvalidValue.CompareAndSwap(false, true) {
		v, _ := attrs.Get(key)
		s.logger.Warn("a resource's rank attribute is not a non-negative integer; such resources are treated as having no rank (on_missing_rank) and counted with reason invalid_rank; logged once",
			zap.String("attribute", key),
			zap.String("value", v.AsString()))
	}
}
