package stepsamplingprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor"

import (
	"hash/maphash"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
)

// rankKey tells one training process from another within this processor:
// a hash of its run id and group attributes, and its rank. It lives in
// memory only, so a seeded maphash is fine here; the sample itself never
// depends on it.
type rankKey struct {
	group uint64
	rank  int64
}

// rankIdentity is what a resource says about the process that sent it.
type rankIdentity struct {
	key   rankKey
	runID string
	ok    bool // a usable rank was found
}

type rankReader struct {
	runIDKey  string
	rankKeys  []string
	groupKeys []string
	seed      maphash.Seed
}

// identify reads the resource's rank, run id and group. A missing run id is
// the empty string: the ranks of a run that carries none still agree.
func (r *rankReader) identify(attrs pcommon.Map) rankIdentity {
	rank, _, status := rankattr.Lookup(attrs, r.rankKeys)
	if status != rankattr.Valid {
		return rankIdentity{}
	}
	id := rankIdentity{key: rankKey{rank: rank}, ok: true}
	var h maphash.Hash
	h.SetSeed(r.seed)
	if v, ok := attrs.Get(r.runIDKey); ok {
		var num [20]byte
		id.runID = rankattr.GroupValue(v, num[:0]) // an int run id and its decimal string are one run
	}
	_, _ = h.WriteString(id.runID)
	_ = h.WriteByte(0xff)
	rankattr.HashGroup(&h, attrs, r.groupKeys)
	id.key.group = h.Sum64()
	return id
}
