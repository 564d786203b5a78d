// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package steps

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// refusing refuses every request while down, then passes them to sink.
type refusing struct {
	consumertest.TracesSink
	down bool
}

func (*refusing) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (r *refusing) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if r.down {
		return errors.New("refused")
	}
	return r.TracesSink.ConsumeTraces(ctx, td)
}

// chunkOf is a placed chunk of n spans of one resource, every span held.
func chunkOf(n int) (*Chunk, []Held) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutInt("nv.dl.rank", 3)
	ss := rs.ScopeSpans().AppendEmpty()
	for range n {
		ss.Spans().AppendEmpty().SetName("s")
	}
	c := NewChunk(rs, Rank{}, 0)
	held := make([]Held, n)
	for i := range n {
		held[i] = c.Hold(i, 0)
	}
	c.Placed()
	return c, held
}

// Held spans go out in requests of at most MaxRequestSpans; a request the
// next consumer refuses is sent again, in order, until it is taken, once.
func TestOutputCutsRequestsAndSendsAgain(t *testing.T) {
	next := &refusing{down: true}
	o := NewOutput(next)
	_, held := chunkOf(MaxRequestSpans + 10)
	for i, h := range held {
		_, emptied := o.Add(h)
		assert.Equal(t, i == len(held)-1, emptied, "the chunk empties with its last span")
	}
	assert.Equal(t, MaxRequestSpans+10, o.Ready())
	refused, err := o.Send(t.Context())
	require.Error(t, err)
	assert.Equal(t, MaxRequestSpans, refused, "the first request")
	assert.Equal(t, MaxRequestSpans+10, o.Unsent())

	next.down = false
	refused, err = o.Send(t.Context())
	require.NoError(t, err)
	assert.Zero(t, refused)
	require.Len(t, next.AllTraces(), 2)
	assert.Equal(t, MaxRequestSpans, next.AllTraces()[0].SpanCount())
	assert.Equal(t, 10, next.AllTraces()[1].SpanCount())
	assert.Zero(t, o.Unsent())
	_, err = o.Send(t.Context())
	require.NoError(t, err)
	assert.Len(t, next.AllTraces(), 2, "sent once")
	assert.Zero(t, o.Ready(), "nothing added since")
}
