// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepsamplingprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor"

import (
	"crypto/sha256"
	"encoding/binary"
	"strconv"
)

// stepFraction maps (run id, iteration) to a number uniform in [0,1): the
// first 8 bytes of sha256 of "<run id>:<iteration>" (the iteration in
// decimal), read big-endian, keeping the top 53 bits, over 2^53. SHA-256
// rather than a fast non-cryptographic hash because every tool can
// reproduce it (sha256sum, Python's hashlib) and because consecutive
// iterations, which differ in one or two trailing digits, must still land
// far apart; FNV-1a alone barely moves its top bits for a change in the
// last byte. It is computed once per rank step, not per span.
func stepFraction(runID string, iteration int64) float64 {
	var buf [128]byte
	key := append(buf[:0], runID...)
	key = append(key, ':')
	key = strconv.AppendInt(key, iteration, 10)
	sum := sha256.Sum256(key)
	return float64(binary.BigEndian.Uint64(sum[:8])>>11) / (1 << 53)
}

// stepSampler decides which iterations are kept.
type stepSampler struct {
	rate  float64
	every int64

	// The last decision, reused: the ranks of a batch are mostly at the same
	// iteration of the same run.
	lastRun  string
	lastIter int64
	lastKeep bool
	lastSet  bool
}

func newStepSampler(cfg *Config) *stepSampler {
	return &stepSampler{rate: cfg.SampleRate, every: cfg.Every}
}

// keep reports whether the iteration is in the sample. It is a function of
// its arguments and the configuration alone, the same everywhere.
func (s *stepSampler) keep(runID string, iteration int64) bool {
	if s.every > 0 {
		return iteration%s.every == 0
	}
	if s.rate >= 1 {
		return true
	}
	if s.lastSet && s.lastIter == iteration && s.lastRun == runID {
		return s.lastKeep
	}
	k := stepFraction(runID, iteration) < s.rate
	s.lastRun, s.lastIter, s.lastKeep, s.lastSet = runID, iteration, k, true
	return k
}
