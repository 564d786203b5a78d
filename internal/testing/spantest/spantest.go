// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package spantest reads batches of spans back, in tests.
package spantest // import "github.com/nemo-lens/otelcol-nemo/internal/testing/spantest"

import (
	"iter"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// All yields every span of td with its resource, in order.
func All(td ptrace.Traces) iter.Seq2[pcommon.Resource, ptrace.Span] {
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
