// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepsamplingprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor"

import (
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// rankIdentity is what a resource says about the process that sent it.
// Its key tells one training process from another within this processor
// (run id, group attributes and rank); the sample itself never depends on
// it, only on the run id.
type rankIdentity struct {
	key   steps.Rank
	runID string
	ok    bool // a usable rank was found
}

type rankReader struct {
	runIDKey string
	reader   *steps.Reader
}

// newRankReader reads the rank under rankKeys, and tells processes apart
// by the run id and groupKeys.
func newRankReader(runIDKey string, rankKeys, groupKeys []string) rankReader {
	if !slices.Contains(groupKeys, runIDKey) {
		groupKeys = append([]string{runIDKey}, groupKeys...)
	}
	return rankReader{runIDKey: runIDKey, reader: steps.NewReader(rankKeys, nil, groupKeys)}
}

// identify reads the resource's rank, run id and group. A missing run id is
// the empty string: the ranks of a run that carries none still agree.
func (r *rankReader) identify(attrs pcommon.Map) rankIdentity {
	id, status := r.reader.Read(attrs)
	if status != rankattr.Valid {
		return rankIdentity{}
	}
	ri := rankIdentity{key: id.Rank, ok: true}
	if v, ok := attrs.Get(r.runIDKey); ok {
		var num [20]byte
		ri.runID = rankattr.GroupValue(v, num[:0]) // an int run id and its decimal string are one run
	}
	return ri
}
