// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor"

import (
	"crypto/md5" //nolint:gosec // not for security: NeMo Lens picks sampled ranks with md5 and we must agree bit for bit
	"strconv"
	"sync/atomic"
)

// sampleBuckets is the modulus of the NeMo Lens rank hash.
const sampleBuckets = 10000

// rankBucket returns int(md5(str(rank)).hexdigest(), 16) % 10000: the md5 of
// the decimal rank read as one 128-bit big-endian integer, reduced mod 10000.
// It does not allocate.
func rankBucket(rank int64) int {
	var buf [20]byte
	sum := md5.Sum(strconv.AppendInt(buf[:0], rank, 10)) //nolint:gosec // see import
	rem := 0
	for _, b := range sum {
		rem = (rem<<8 | int(b)) % sampleBuckets
	}
	return rem
}

// bucketCutoff returns the number of buckets b in [0,10000) for which the
// library's `b / 10000.0 < rate` holds. b / 10000.0 grows with b, so those
// buckets are exactly [0, cutoff) and "bucket < cutoff" reproduces the float
// comparison bit for bit without repeating it per rank.
func bucketCutoff(rate float64) int {
	n := 0
	for n < sampleBuckets && float64(n)/sampleBuckets < rate {
		n++
	}
	return n
}

// cachedSampleRanks bounds the sampled-decision memo: 2 bits per rank.
const cachedSampleRanks = 1 << 16

// sampledRanks decides the sampled strategy. Decisions for ranks below
// cachedSampleRanks are memoised in a fixed 16 KiB table, safe for
// concurrent use; larger ranks are hashed each time.
type sampledRanks struct {
	cutoff int
	// memo holds two bits per rank: bit 2i says rank i is decided, bit 2i+1
	// that it is kept. Both are set with one atomic Or, so a reader that sees
	// the decided bit also sees the decision.
	memo [cachedSampleRanks / 32]atomic.Uint64
}

func newSampledRanks(rate float64) *sampledRanks {
	return &sampledRanks{cutoff: bucketCutoff(rate)}
}

func (s *sampledRanks) keep(rank int64) bool {
	if rank < 0 || rank >= cachedSampleRanks {
		return rankBucket(rank) < s.cutoff
	}
	word, shift := &s.memo[rank/32], uint(rank%32)*2
	if bits := word.Load() >> shift; bits&1 != 0 {
		return bits&2 != 0
	}
	kept := rankBucket(rank) < s.cutoff
	set := uint64(1)
	if kept {
		set |= 2
	}
	word.Or(set << shift)
	return kept
}
