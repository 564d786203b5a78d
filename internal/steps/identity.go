// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package steps // import "github.com/nemo-lens/otelcol-nemo/internal/steps"

import (
	"hash/maphash"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
)

// Rank names one rank of one run and worker group: Group hashes the group
// attributes. It lives in memory only, so a seeded hash is fine.
type Rank struct {
	Group uint64
	Rank  int64
}

// Step names one training step of one run and worker group.
type Step struct {
	Group     uint64
	Iteration int64
}

// StepOf is the rank's step of that iteration.
func (r Rank) StepOf(iteration int64) Step { return Step{Group: r.Group, Iteration: iteration} }

// Identity is what a resource says about the process that sent it.
type Identity struct {
	Rank
	// WorldSize is the world size the rank reports, 0 when none.
	WorldSize int64
}

// Reader reads a rank's identity (run and group, rank, world size) from its
// resource attributes, the same way in every component.
type Reader struct {
	seed                               maphash.Seed
	rankKeys, worldSizeKeys, groupKeys []string
}

// NewReader reads the rank under rankKeys, the world size under
// worldSizeKeys (none: 0) and the run and group under groupKeys.
func NewReader(rankKeys, worldSizeKeys, groupKeys []string) *Reader {
	return &Reader{
		seed: maphash.MakeSeed(), rankKeys: slices.Clone(rankKeys),
		worldSizeKeys: slices.Clone(worldSizeKeys), groupKeys: slices.Clone(groupKeys),
	}
}

// Read is the resource's identity; status says whether a usable rank was
// found (rankattr.Valid), none (Missing) or garbage (Invalid).
func (r *Reader) Read(attrs pcommon.Map) (Identity, rankattr.Status) {
	rank, _, status := rankattr.Lookup(attrs, r.rankKeys)
	if status != rankattr.Valid {
		return Identity{}, status
	}
	id := Identity{Rank: Rank{Group: r.Group(attrs), Rank: rank}}
	if len(r.worldSizeKeys) > 0 {
		if size, _, status := rankattr.Lookup(attrs, r.worldSizeKeys); status == rankattr.Valid {
			id.WorldSize = size
		}
	}
	return id, rankattr.Valid
}

// Group identifies a resource's run and group by hashing its group
// attributes, without building a string key.
func (r *Reader) Group(attrs pcommon.Map) uint64 {
	var h maphash.Hash
	h.SetSeed(r.seed)
	rankattr.HashGroup(&h, attrs, r.groupKeys)
	return h.Sum64()
}
