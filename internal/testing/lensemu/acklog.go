// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package lensemu

import (
	"context"
	"maps"
	"sync"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// AckLog is the set of span ids a collector acknowledged to the ranks that
// share it (Rank.Acked): what a test of "acknowledged means delivered"
// checks against the output, span by span. Safe for concurrent use; a nil
// AckLog records nothing.
type AckLog struct {
	mu  sync.Mutex
	ids map[trace.SpanID]struct{}
}

// NewAckLog returns an empty AckLog.
func NewAckLog() *AckLog { return &AckLog{ids: map[trace.SpanID]struct{}{}} }

func (a *AckLog) add(spans []sdktrace.ReadOnlySpan) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range spans {
		a.ids[s.SpanContext().SpanID()] = struct{}{}
	}
}

// IDs returns a copy of the acknowledged span ids.
func (a *AckLog) IDs() map[trace.SpanID]struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.ids)
}

// producedSpans records every span a rank ends into its Produced log.
type producedSpans struct{ log *AckLog }

func (producedSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (p producedSpans) OnEnd(s sdktrace.ReadOnlySpan)                 { p.log.add([]sdktrace.ReadOnlySpan{s}) }
func (producedSpans) Shutdown(context.Context) error                  { return nil }
func (producedSpans) ForceFlush(context.Context) error                { return nil }
