// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package randpdata makes random pdata for property tests: attribute values
// of every type, nested, with strings that need escaping in JSON or are not
// valid UTF-8, and spans that carry them. The jsonl_file exporter's tests
// and e2e's check of its records against the shipped JSON Schemas share it.
package randpdata // import "github.com/nemo-lens/otelcol-nemo/internal/testing/randpdata"

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Value fills v with a random attribute value of any type, nested up to
// depth levels, with strings that need escaping or are not UTF-8.
func Value(r *rand.Rand, v pcommon.Value, depth int) {
	kinds := 7
	if depth <= 0 {
		kinds = 5
	}
	switch r.IntN(kinds + 1) {
	case 0:
		v.SetStr(String(r))
	case 1:
		v.SetInt(int64(r.Uint64()))
	case 2:
		switch r.IntN(5) {
		case 0:
			v.SetDouble(math.NaN())
		case 1:
			v.SetDouble(math.Inf(1 - 2*r.IntN(2)))
		case 2:
			v.SetDouble(float64(r.IntN(1000)))
		default:
			v.SetDouble(math.Float64frombits(r.Uint64()))
			if f := v.Double(); math.IsNaN(f) || math.IsInf(f, 0) {
				v.SetDouble(r.NormFloat64())
			}
		}
	case 3:
		v.SetBool(r.IntN(2) == 0)
	case 4:
		b := make([]byte, r.IntN(20))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		v.SetEmptyBytes().FromRaw(b)
	case 5:
		// leave empty
	case 6:
		s := v.SetEmptySlice()
		for range r.IntN(4) {
			Value(r, s.AppendEmpty(), depth-1)
		}
	default:
		m := v.SetEmptyMap()
		for i := range r.IntN(4) {
			Value(r, m.PutEmpty(String(r)+strconv.Itoa(i)), depth-1)
		}
	}
}

var awkwardPieces = []string{
	"a", "Z", " ", "\"", "\\", "/", "\n", "\r", "\t", "\x00", "\x01", "\x1f", "\x7f",
	"\xff", "\xc3", "\xc3\x28", "\xed\xa0\x80", "é", "日本", "\u2028", "\U0001F600", "<", ">", "&", "{", "}", "megatron.",
}

// String returns up to 11 pieces of text a JSON writer can get wrong:
// quotes, control characters, invalid UTF-8, U+2028, HTML-special runes.
func String(r *rand.Rand) string {
	var sb strings.Builder
	for range r.IntN(12) {
		sb.WriteString(awkwardPieces[r.IntN(len(awkwardPieces))])
	}
	return sb.String()
}

// Traces returns n spans with random names, statuses, kinds, events, links
// and attribute values of every type, under one resource.
func Traces(r *rand.Rand, n int) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	Value(r, rs.Resource().Attributes().PutEmpty("res"), 2)
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	for i := range n {
		s := spans.AppendEmpty()
		s.SetName(String(r))
		var tid [16]byte
		var sid, pid [8]byte
		for j := range tid {
			tid[j] = byte(r.Uint32())
		}
		for j := range sid {
			sid[j] = byte(r.Uint32())
			if r.IntN(2) == 0 {
				pid[j] = byte(r.Uint32())
			}
		}
		s.SetTraceID(tid)
		s.SetSpanID(sid)
		s.SetParentSpanID(pid)
		s.SetKind(ptrace.SpanKind(r.IntN(6)))
		s.Status().SetCode(ptrace.StatusCode(r.IntN(3)))
		s.Status().SetMessage(String(r))
		s.SetStartTimestamp(1748779200000000000)
		s.SetEndTimestamp(math.MaxUint64)
		for k := range 4 {
			Value(r, s.Attributes().PutEmpty(strconv.Itoa(k)+String(r)), 3)
		}
		if i%3 == 0 {
			ev := s.Events().AppendEmpty()
			ev.SetName(String(r))
			Value(r, ev.Attributes().PutEmpty("e"), 2)
			ev.SetDroppedAttributesCount(uint32(r.IntN(2)))
			l := s.Links().AppendEmpty()
			l.SetTraceID(tid)
			l.SetSpanID(sid)
			s.SetDroppedLinksCount(uint32(r.IntN(2)))
		}
	}
	return td
}
