// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter"

import (
	"encoding/base64"
	"encoding/hex"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// JSON primitives that append to a caller-owned buffer. They never fail and
// never allocate beyond growing dst: the exporter reuses its buffers, so the
// hot path costs no allocation per record.

// maxValueDepth bounds how deeply nested maps and arrays are written as JSON
// structure. Deeper values are written as a JSON string instead, so no line
// trips the nesting limit of a reader (jq, Python's json) and no hostile
// payload can exhaust the stack.
const maxValueDepth = 64

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. Control characters, quote and
// backslash are escaped; each byte that is not part of valid UTF-8 becomes
// U+FFFD (as encoding/json does), so the output is always valid UTF-8.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		// Skip eight plain ASCII bytes at a time: keys and most values have
		// nothing to escape.
		if i+8 <= len(s) && !needsEscape8(load8(s, i)) {
			i += 8
			continue
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\uFFFD"...)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// load8 returns the eight bytes of s at i as a little-endian word.
func load8(s string, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// needsEscape8 reports whether any byte of x is a control character, '"',
// '\\' or not ASCII. It may report true for a plain word right after such a
// byte (the subtraction borrows); the caller then looks byte by byte.
func needsEscape8(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	control := (x - ones*0x20) &^ x
	q := x ^ (ones * '"')
	quote := (q - ones) &^ q
	b := x ^ (ones * '\\')
	backslash := (b - ones) &^ b
	return (control|quote|backslash|x)&highs != 0
}

// appendJSONFloat appends f as a JSON number, in the same shortest
// round-trip form as encoding/json, except that an integral value keeps a
// ".0" so readers can tell a double attribute from an int one. NaN and the
// infinities, which JSON numbers cannot hold, are written as the strings
// "NaN", "Infinity" and "-Infinity" (the OTLP/JSON and protobuf JSON
// mapping encoding).
func appendJSONFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	}
	// Integral values (bucket bounds, counts kept as doubles) are common and
	// print exactly as integers; this skips the shortest-form search.
	if f == math.Trunc(f) && math.Abs(f) < 1e15 && (f != 0 || !math.Signbit(f)) {
		dst = strconv.AppendInt(dst, int64(f), 10)
		return append(dst, '.', '0')
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// Shorten e-09 to e-9, as encoding/json does.
		n := len(dst)
		if n-start >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
		return dst
	}
	if slices.Contains(dst[start:], '.') {
		return dst
	}
	return append(dst, '.', '0')
}

// appendHexID appends id as a quoted lowercase hex string.
func appendHexID(dst, id []byte) []byte {
	dst = append(dst, '"')
	dst = hex.AppendEncode(dst, id)
	return append(dst, '"')
}

// appendAttributes appends m as a JSON object whose values keep their OTLP
// types.
func appendAttributes(dst []byte, m pcommon.Map) []byte {
	return appendMap(dst, m, 0)
}

func appendMap(dst []byte, m pcommon.Map, depth int) []byte {
	dst = append(dst, '{')
	first := true
	for k, v := range m.All() {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendJSONString(dst, k)
		dst = append(dst, ':')
		dst = appendValue(dst, v, depth+1)
	}
	return append(dst, '}')
}

// appendValue appends v as the JSON value of its type: string, integer,
// number, boolean, array, object, base64 string for bytes and null for an
// empty value.
func appendValue(dst []byte, v pcommon.Value, depth int) []byte {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return appendJSONString(dst, v.Str())
	case pcommon.ValueTypeInt:
		return strconv.AppendInt(dst, v.Int(), 10)
	case pcommon.ValueTypeDouble:
		return appendJSONFloat(dst, v.Double())
	case pcommon.ValueTypeBool:
		return strconv.AppendBool(dst, v.Bool())
	case pcommon.ValueTypeBytes:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, v.Bytes().AsRaw())
		return append(dst, '"')
	case pcommon.ValueTypeMap:
		if depth >= maxValueDepth {
			return appendJSONString(dst, v.AsString())
		}
		return appendMap(dst, v.Map(), depth)
	case pcommon.ValueTypeSlice:
		if depth >= maxValueDepth {
			return appendJSONString(dst, v.AsString())
		}
		s := v.Slice()
		dst = append(dst, '[')
		for i := 0; i < s.Len(); i++ {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendValue(dst, s.At(i), depth+1)
		}
		return append(dst, ']')
	default:
		return append(dst, "null"...)
	}
}

func appendUintArray(dst []byte, s pcommon.UInt64Slice) []byte {
	dst = append(dst, '[')
	for i := 0; i < s.Len(); i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendUint(dst, s.At(i), 10)
	}
	return append(dst, ']')
}

func appendFloatArray(dst []byte, s pcommon.Float64Slice) []byte {
	dst = append(dst, '[')
	for i := 0; i < s.Len(); i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONFloat(dst, s.At(i))
	}
	return append(dst, ']')
}
