// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankattr

import (
	"hash/maphash"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// GroupValue is a group attribute's value as every component compares it: a
// string as is, an int in decimal (an int run id and its decimal string are
// the same run, as with ranks), anything else as pcommon.Value.AsString.
// scratch is reused for the int's digits.
func GroupValue(v pcommon.Value, scratch []byte) string {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return v.Str()
	case pcommon.ValueTypeInt:
		return string(strconv.AppendInt(scratch, v.Int(), 10))
	default:
		return v.AsString()
	}
}

// HashGroup writes the group attributes keys of attrs into h, so that a
// resource's run and group are keyed by a hash without building a string:
// for each key whether it is present and its GroupValue. It does not
// allocate for string and int values.
func HashGroup(h *maphash.Hash, attrs pcommon.Map, keys []string) {
	var num [20]byte
	for _, k := range keys {
		v, ok := attrs.Get(k)
		if !ok {
			_ = h.WriteByte(0)
			continue
		}
		_ = h.WriteByte(1)
		switch v.Type() {
		case pcommon.ValueTypeStr:
			_, _ = h.WriteString(v.Str())
		case pcommon.ValueTypeInt:
			_, _ = h.Write(strconv.AppendInt(num[:0], v.Int(), 10))
		default:
			_, _ = h.WriteString(v.AsString())
		}
		_ = h.WriteByte(0xff)
	}
}
