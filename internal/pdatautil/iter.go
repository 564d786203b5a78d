// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package pdatautil

import (
	"iter"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Spans yields every span of td with its resource, in order: for reading a
// batch back (tests, checks). Code that moves or filters spans walks the
// slices itself, as it needs their indexes.
func Spans(td ptrace.Traces) iter.Seq2[pcommon.Resource, ptrace.Span] {
	return func(yield func(pcommon.Resource, ptrace.Span) bool) {
		rss := td.ResourceSpans()
		for i := range rss.Len() {
			res, sss := rss.At(i).Resource(), rss.At(i).ScopeSpans()
			for j := range sss.Len() {
				spans := sss.At(j).Spans()
				for k := range spans.Len() {
					if !yield(res, spans.At(k)) {
						return
					}
				}
			}
		}
	}
}
