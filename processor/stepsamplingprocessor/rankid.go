package stepsamplingprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor"

import (
	"hash/maphash"
	"strconv"

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
	var num [20]byte
	if v, ok := attrs.Get(r.runIDKey); ok {
		id.runID = attrString(v, num[:0])
	}
	_, _ = h.WriteString(id.runID)
	for _, k := range r.groupKeys {
		_ = h.WriteByte(0xff)
		v, ok := attrs.Get(k)
		if !ok {
			_ = h.WriteByte(0)
			continue
		}
		_ = h.WriteByte(1)
		if v.Type() == pcommon.ValueTypeStr {
			_, _ = h.WriteString(v.Str())
		} else {
			_, _ = h.WriteString(attrString(v, num[:0]))
		}
	}
	id.key.group = h.Sum64()
	return id
}

// attrString is the value as the sample hashes it: a string as is, an int
// in decimal (an int run id and its decimal string are the same run).
func attrString(v pcommon.Value, scratch []byte) string {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return v.Str()
	case pcommon.ValueTypeInt:
		return string(strconv.AppendInt(scratch, v.Int(), 10))
	default:
		return v.AsString()
	}
}
