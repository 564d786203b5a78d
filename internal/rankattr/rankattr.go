// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package rankattr reads a training process's rank identity (rank, world size,
// local rank) from resource attributes.
//
// NeMo Lens sends these under two spellings (`nv.dl.*`, newer, and `dl.*`,
// older) and, depending on how the job set them, as an int (`3`) or as a
// string (`"3"`, from OTEL_RESOURCE_ATTRIBUTES). Every component that reads a
// rank goes through this package so that they all agree on what a rank is.
package rankattr // import "github.com/nemo-lens/otelcol-nemo/internal/rankattr"

import (
	"math"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
)

// Default attribute keys, newest spelling first: the first key present wins.
var (
	DefaultRankKeys      = []string{attrkey.DLRank, attrkey.LegacyDLRank}
	DefaultWorldSizeKeys = []string{attrkey.DLWorldSize, attrkey.LegacyDLWorldSize}
	DefaultLocalRankKeys = []string{attrkey.DLLocalRank, attrkey.LegacyDLLocalRank}
)

// DefaultGroupKeys are the resource attributes that identify a run and, in
// NeMo-RL, the worker group within which ranks are numbered: rank numbers are
// only meaningful within one group. Like the keys above, callers clone it
// before keeping it.
var DefaultGroupKeys = []string{attrkey.RunID, attrkey.WorkerGroup}

// PipelineSizeKeys are where NeMo Lens puts a rank's pipeline-parallel
// size, on its resource: the newer spelling first.
var PipelineSizeKeys = []string{attrkey.PipelineSize, attrkey.LegacyPipelineSize}

// PipelineSize is the resource's pipeline-parallel size, 0 when it has
// none (a rank's stage is on its spans: attrkey.PipelineRank).
func PipelineSize(attrs pcommon.Map) int {
	if n, _, status := Lookup(attrs, PipelineSizeKeys); status == Valid {
		return int(min(n, math.MaxInt16))
	}
	return 0
}

// Status says what Lookup found.
type Status int

const (
	// Missing: none of the keys is present.
	Missing Status = iota
	// Valid: the first key present holds a non-negative integer (int or decimal string).
	Valid
	// Invalid: the first key present holds something that is not a non-negative
	// integer (a non-numeric string, a double, a bool, ...).
	Invalid
)

func (s Status) String() string {
	switch s {
	case Missing:
		return "missing"
	case Valid:
		return "valid"
	default:
		return "invalid"
	}
}

// Lookup returns the value of the first of keys present in attrs, the key it
// was found under, and whether it is a usable non-negative integer. An int
// value and a decimal string (surrounding spaces allowed, as env vars carry
// them) are both accepted; anything else is Invalid and left for the caller
// to count, never a panic.
func Lookup(attrs pcommon.Map, keys []string) (value int64, key string, status Status) {
	for _, k := range keys {
		v, ok := attrs.Get(k)
		if !ok {
			continue
		}
		n, valid := Parse(v)
		if !valid {
			return 0, k, Invalid
		}
		return n, k, Valid
	}
	return 0, "", Missing
}

// Parse interprets one attribute value as a rank-like non-negative integer.
func Parse(v pcommon.Value) (int64, bool) {
	switch v.Type() {
	case pcommon.ValueTypeInt:
		n := v.Int()
		return n, n >= 0
	case pcommon.ValueTypeStr:
		return ParseString(v.Str())
	default:
		return 0, false
	}
}

// ParseString parses a decimal rank string such as "3" or " 3 ". It does not
// allocate.
func ParseString(s string) (int64, bool) {
	start, end := 0, len(s)
	for start < end && isSpace(s[start]) {
		start++
	}
	for end > start && isSpace(s[end-1]) {
		end--
	}
	n, err := strconv.ParseInt(s[start:end], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
