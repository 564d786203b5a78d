// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package pdatautil // import "github.com/nemo-lens/otelcol-nemo/internal/pdatautil"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
)

// Truncated reports whether NeMo Lens force-closed the span at shutdown
// (nemo.span.truncated): a bool true, or the string "true" that an
// attribute set through an environment variable carries.
func Truncated(s ptrace.Span) bool {
	v, ok := s.Attributes().Get(attrkey.SpanTruncated)
	if !ok {
		return false
	}
	switch v.Type() {
	case pcommon.ValueTypeBool:
		return v.Bool()
	case pcommon.ValueTypeStr:
		return v.Str() == "true"
	default:
		return false
	}
}
