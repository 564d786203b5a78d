// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/randpdata"
)

func TestAppendJSONFloat(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{0, "0.0"},
		{math.Copysign(0, -1), "-0.0"},
		{1, "1.0"},
		{-3, "-3.0"},
		{0.1, "0.1"},
		{2.5e-4, "0.00025"},
		{1e-6, "0.000001"},
		{1e-7, "1e-7"},
		{1.5e-300, "1.5e-300"},
		{1e20, "100000000000000000000.0"},
		{1e21, "1e+21"},
		{math.MaxFloat64, "1.7976931348623157e+308"},
		{math.SmallestNonzeroFloat64, "5e-324"},
		{math.NaN(), `"NaN"`},
		{math.Inf(1), `"Infinity"`},
		{math.Inf(-1), `"-Infinity"`},
	} {
		got := string(appendJSONFloat(nil, tc.in))
		assert.Equal(t, tc.want, got, "%v", tc.in)
		assert.True(t, json.Valid([]byte(got)), got)
	}
	// Every finite double reads back exactly.
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		f := math.Float64frombits(r.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		got := appendJSONFloat(nil, f)
		back, err := strconv.ParseFloat(string(got), 64)
		require.NoError(t, err, "%s", got)
		require.Equal(t, f, back, "%s", got)
		require.True(t, json.Valid(got))
	}
}

// FuzzAppendJSONString checks that any string, valid UTF-8 or not, becomes
// a valid JSON string holding what encoding/json would make of it.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "\x00\x01\x1f\"\\/", "\xff", "a\xc3", "\xed\xa0\x80", "日本\u2028", "<>&", "\U0001F600"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := appendJSONString(nil, s)
		require.True(t, utf8.Valid(got))
		require.True(t, json.Valid(got), "%q", got)
		var decoded string
		require.NoError(t, json.Unmarshal(got, &decoded))
		ref, err := json.Marshal(s)
		require.NoError(t, err)
		var want string
		require.NoError(t, json.Unmarshal(ref, &want))
		require.Equal(t, want, decoded)
		if utf8.ValidString(s) {
			require.Equal(t, s, decoded, "valid UTF-8 must round-trip unchanged")
		}
	})
}

// expectedJSON is what a JSON reader must get for v: the value's type
// kept, strings as encoding/json reads them back, NaN and infinities as the
// documented strings, bytes as base64.
func expectedJSON(tb testing.TB, v pcommon.Value) any {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		ref, err := json.Marshal(v.Str())
		require.NoError(tb, err)
		var s string
		require.NoError(tb, json.Unmarshal(ref, &s))
		return s
	case pcommon.ValueTypeInt:
		return v.Int()
	case pcommon.ValueTypeDouble:
		f := v.Double()
		switch {
		case math.IsNaN(f):
			return "NaN"
		case math.IsInf(f, 1):
			return "Infinity"
		case math.IsInf(f, -1):
			return "-Infinity"
		}
		return f
	case pcommon.ValueTypeBool:
		return v.Bool()
	case pcommon.ValueTypeBytes:
		return base64.StdEncoding.EncodeToString(v.Bytes().AsRaw())
	case pcommon.ValueTypeSlice:
		out := []any{}
		for i := 0; i < v.Slice().Len(); i++ {
			out = append(out, expectedJSON(tb, v.Slice().At(i)))
		}
		return out
	case pcommon.ValueTypeMap:
		return expectedMap(tb, v.Map())
	default:
		return nil
	}
}

func expectedMap(tb testing.TB, m pcommon.Map) map[string]any {
	out := map[string]any{}
	for k, v := range m.All() {
		out[expectedJSON(tb, pcommon.NewValueStr(k)).(string)] = expectedJSON(tb, v)
	}
	return out
}

// typedJSON turns decoded numbers into int64 when written without fraction
// or exponent and float64 otherwise, so that types can be compared.
func typedJSON(tb testing.TB, v any) any {
	switch x := v.(type) {
	case json.Number:
		if strings.ContainsAny(string(x), ".eE") {
			f, err := x.Float64()
			require.NoError(tb, err)
			return f
		}
		i, err := x.Int64()
		require.NoError(tb, err)
		return i
	case []any:
		out := []any{}
		for _, e := range x {
			out = append(out, typedJSON(tb, e))
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = typedJSON(tb, e)
		}
		return out
	default:
		return v
	}
}

// TestRandomAttributesRoundTrip is a property test: for random values of
// every type, every line is strict JSON and reads back as the value with its
// type.
func TestRandomAttributesRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for iter := range 300 {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		randpdata.Value(r, rs.Resource().Attributes().PutEmpty("res"), 2)
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName(randpdata.String(r))
		span := ss.Spans().AppendEmpty()
		span.SetName(randpdata.String(r))
		span.Status().SetMessage(randpdata.String(r))
		for i := range 8 {
			randpdata.Value(r, span.Attributes().PutEmpty(randpdata.String(r)+strconv.Itoa(i)), 3)
		}
		line := encodeTraces(td)
		lines := splitLines(t, line)
		require.Len(t, lines, 1)
		var rec spanRecord
		decodeStrict(t, lines[0], &rec)
		assert.Equal(t, expectedMap(t, span.Attributes()), typedJSON(t, rec.Attributes), "iteration %d: %s", iter, lines[0])
		assert.Equal(t, expectedMap(t, rs.Resource().Attributes()), typedJSON(t, rec.Resource), "iteration %d", iter)
		assert.Equal(t, expectedJSON(t, pcommon.NewValueStr(span.Name())), rec.Name)
	}
}

func TestDeeplyNestedValueIsCapped(t *testing.T) {
	td := ptrace.NewTraces()
	span := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	v := span.Attributes().PutEmpty("deep")
	for range 1000 {
		v = v.SetEmptySlice().AppendEmpty()
	}
	v.SetStr("bottom")
	out := encodeTraces(td)
	var rec spanRecord
	decodeStrict(t, splitLines(t, out)[0], &rec)
	depth := 0
	cur := rec.Attributes["deep"]
	for {
		s, ok := cur.([]any)
		if !ok {
			break
		}
		depth++
		cur = s[0]
	}
	assert.Equal(t, maxValueDepth-1, depth)
	assert.IsType(t, "", cur, "the part below the cap is a string")
	assert.Contains(t, cur, "bottom")
}

// TestNeedsEscape8 checks the word-at-a-time test never misses a byte that
// needs escaping and only flags plain words for the documented reason.
func TestNeedsEscape8(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	special := func(c byte) bool { return c < 0x20 || c == '"' || c == '\\' || c >= 0x80 }
	for range 200000 {
		var b [8]byte
		for i := range b {
			if r.IntN(4) == 0 {
				b[i] = byte(r.Uint32())
			} else {
				b[i] = byte(0x20 + r.IntN(0x60))
			}
		}
		hasSpecial := slices.ContainsFunc(b[:], special)
		got := needsEscape8(load8(string(b[:]), 0))
		if hasSpecial {
			require.True(t, got, "%q", b)
		} else {
			require.False(t, got, "%q", b)
		}
	}
}

// TestAppendJSONFloatIntegralFastPath checks the integral shortcut against
// the general formatting it skips.
func TestAppendJSONFloatIntegralFastPath(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for range 100000 {
		f := math.Trunc(r.NormFloat64() * math.Pow(10, float64(r.IntN(16))))
		if math.Abs(f) >= 1e15 {
			continue
		}
		want := strconv.FormatFloat(f, 'f', -1, 64) + ".0"
		require.Equal(t, want, string(appendJSONFloat(nil, f)))
	}
}
