// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package steps // import "github.com/nemo-lens/otelcol-nemo/internal/steps"

import (
	"context"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/pdatautil"
	"github.com/nemo-lens/otelcol-nemo/internal/stepsummary"
)

// MaxRequestSpans bounds the spans of one request an Output sends: a tick
// can release many held spans at once, and an exporter whose sending queue
// counts items refuses a request larger than its batch whole.
const MaxRequestSpans = 8192

// Output passes a holder's held spans on from its engine's ticker: they were
// acknowledged to their senders when they arrived, so a request the next
// consumer refuses is kept and sent again at the next tick, never dropped.
// Spans are moved out of their chunks (no copy) into requests of at most
// MaxRequestSpans, under copies of their resource and scope made once per
// chunk and request.
//
// Add and Ready are called under the engine's lock; Send and Unsent from
// any goroutine.
type Output struct {
	next consumer.Traces
	// The request being filled, and those filled since Ready, under the
	// engine's lock.
	td    ptrace.Traces
	count int
	mover pdatautil.SpanMover[*Chunk]
	// summaries is the summary scope of each rank's resource in the
	// request being filled.
	summaries map[Rank]ptrace.SpanSlice
	filled    []request
	// queue are the requests ready to send, oldest first, under mu; one
	// Send at a time (sending), so that they go out in order. unsent counts
	// the spans added and not passed on.
	mu      sync.Mutex
	queue   []request
	sending sync.Mutex
	unsent  atomic.Int64
}

type request struct {
	td    ptrace.Traces
	count int
}

// NewOutput passes held spans on to next.
func NewOutput(next consumer.Traces) *Output {
	o := &Output{next: next, mover: pdatautil.NewSpanMover[*Chunk](), summaries: map[Rank]ptrace.SpanSlice{}}
	o.startRequest()
	return o
}

func (o *Output) startRequest() {
	o.td, o.count = ptrace.NewTraces(), 0
	o.mover.Reset(o.td.ResourceSpans())
	clear(o.summaries)
}

// room starts a new request when the one being filled is full, and counts
// the span about to be added.
func (o *Output) room() {
	if o.count == MaxRequestSpans {
		o.filled = append(o.filled, request{td: o.td, count: o.count})
		o.startRequest()
	}
	o.count++
	o.unsent.Add(1)
}

// Add moves a held span into the output and releases it. It returns the
// span in the output, to mark it, and whether its chunk holds nothing more.
func (o *Output) Add(h Held) (ptrace.Span, bool) {
	o.room()
	return h.Move(&o.mover)
}

// Summary adds an empty span to the summary scope (internal/stepsummary)
// of rank's resource, res, copied once per rank and request, for the
// caller to write a summary into.
func (o *Output) Summary(rank Rank, res pcommon.Resource) ptrace.Span {
	o.room()
	spans, ok := o.summaries[rank]
	if !ok {
		rs := o.td.ResourceSpans().AppendEmpty()
		res.CopyTo(rs.Resource())
		spans = stepsummary.NewScope(rs)
		o.summaries[rank] = spans
	}
	return spans.AppendEmpty()
}

// Ready queues what was added since the last Ready for Send. It returns
// how many spans.
func (o *Output) Ready() int {
	if o.count > 0 {
		o.filled = append(o.filled, request{td: o.td, count: o.count})
		o.startRequest()
	}
	n := 0
	for _, r := range o.filled {
		n += r.count
	}
	o.mu.Lock()
	o.queue = append(o.queue, o.filled...)
	o.mu.Unlock()
	clear(o.filled)
	o.filled = o.filled[:0]
	return n
}

// Unsent is the spans added and not passed on yet.
func (o *Output) Unsent() int { return int(o.unsent.Load()) }

// Send passes the queued requests on, oldest first. The first one the next
// consumer refuses stays queued with those after it, for the next tick; it
// returns that request's spans and the error.
func (o *Output) Send(ctx context.Context) (refused int, err error) {
	o.sending.Lock()
	defer o.sending.Unlock()
	for {
		o.mu.Lock()
		if len(o.queue) == 0 {
			o.queue = nil
			o.mu.Unlock()
			return 0, nil
		}
		r := o.queue[0]
		o.mu.Unlock()
		if err := o.next.ConsumeTraces(ctx, r.td); err != nil {
			return r.count, err
		}
		o.mu.Lock()
		o.queue[0] = request{}
		o.queue = o.queue[1:]
		o.mu.Unlock()
		o.unsent.Add(-int64(r.count))
	}
}
