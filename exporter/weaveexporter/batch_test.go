// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package weaveexporter

import (
	"fmt"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
)

// mixedBatch has resources with several scopes, empty scopes, an empty
// resource and spans of varied sizes, all in one project.
func mixedBatch() ptrace.Traces {
	b := newTraceBuilder()
	for r := range 4 {
		attrs := pcommon.NewMap()
		lensfixture.Rank{Rank: int64(r), LegacyKeys: true, ServiceName: "megatron", Extra: []lensfixture.KeyValue{
			{Key: attrkey.WandbEntity, Value: "acme"}, {Key: attrkey.WandbProject, Value: "llm"},
		}}.PutResource(attrs)
		rs := b.resource(attrs.AsRaw(), fmt.Sprintf("r%d", r), r*3)
		rs.ScopeSpans().AppendEmpty().Scope().SetName("empty")
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("megatron.core")
		ss.SetSchemaUrl("https://example.com/scope")
		for k := range 5 {
			s := b.span(ss, fmt.Sprintf("r%d-core-%d", r, k))
			s.Attributes().PutStr("pad", strings.Repeat("x", 37*k*r))
			s.Events().AppendEmpty().SetName("grad_sync")
		}
	}
	b.td.ResourceSpans().AppendEmpty().Resource().Attributes().PutStr("wandb.entity", "acme")
	return b.td
}

func decodeRequest(t *testing.T, body []byte) ptrace.Traces {
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(body)
	require.NoError(t, err)
	return td
}

func TestRequestsCarryExactlyTheirSpans(t *testing.T) {
	td := mixedBatch()
	td.MarkReadOnly()
	r := router{}
	b, err := r.split(td)
	require.NoError(t, err)
	require.Len(t, b.groups, 1)
	assert.Equal(t, (0+3+6+9)+4*5, b.refCount)

	for _, limit := range []int{minMaxRequestBytes, 1500, 4000, 1 << 20} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			reqs := b.requests(limit)
			var seen []string
			for _, req := range reqs {
				body := b.encode(req)
				stream, size := b.stream(req)
				require.Equal(t, len(body), size)
				require.NoError(t, iotest.TestReader(stream, body), "the stream reads the same bytes however it is read")
				if len(req.refs) > 1 {
					assert.LessOrEqual(t, len(body), limit)
				}
				got := decodeRequest(t, body)
				// Same content as copying those spans with pdata.
				assert.Equal(t, encoded(t, copyOf(b, req.refs)), encoded(t, got))
				for i := 0; i < got.ResourceSpans().Len(); i++ {
					forEachSpan(got.ResourceSpans().At(i), func(s ptrace.Span) { seen = append(seen, s.Name()) })
				}
			}
			var want []string
			for i := 0; i < td.ResourceSpans().Len(); i++ {
				forEachSpan(td.ResourceSpans().At(i), func(s ptrace.Span) { want = append(want, s.Name()) })
			}
			assert.Equal(t, want, seen, "every span once, in order")
			if limit == 1<<20 {
				require.Len(t, reqs, 1)
				assert.False(t, reqs[0].whole, "an empty resource has no project: the batch is regrouped")
			}
		})
	}
}

func TestUnchangedBatchIsSentAsEncoded(t *testing.T) {
	b := newTraceBuilder()
	b.resource(project("acme", "llm"), "a", 4)
	b.resource(project("acme", "llm"), "b", 2)
	r := router{}
	bt, err := r.split(b.td)
	require.NoError(t, err)
	reqs := bt.requests(1 << 20)
	require.Len(t, reqs, 1)
	assert.True(t, reqs[0].whole)
	assert.Equal(t, encoded(t, b.td), bt.encode(reqs[0]))

	// Over the limit, the same batch is cut.
	reqs = bt.requests(minMaxRequestBytes / 2)
	assert.Greater(t, len(reqs), 1)
	for _, req := range reqs {
		assert.False(t, req.whole)
		assert.LessOrEqual(t, len(bt.encode(req)), minMaxRequestBytes/2)
	}
}

func TestSplitWithNothingToSend(t *testing.T) {
	b := newTraceBuilder()
	b.resource(map[string]any{"service.name": "x"}, "a", 3)
	r := router{project: "llm"}
	bt, err := r.split(b.td)
	require.NoError(t, err)
	assert.Empty(t, bt.requests(1<<20))
	assert.Equal(t, []int32{0}, bt.unroutable)

	empty, err := r.split(ptrace.NewTraces())
	require.NoError(t, err)
	assert.Empty(t, empty.requests(1<<20))
	assert.Empty(t, empty.unroutable)
}

func TestMalformedEncodingIsAnError(t *testing.T) {
	for _, body := range [][]byte{
		{0x0a, 0x05, 0x01},       // length past the end
		{0x0a},                   // missing length
		{0xff, 0xff, 0xff, 0xff}, // bad tag
	} {
		_, err := children(body, fieldResourceSpans)
		require.ErrorIs(t, err, errMalformed, "%x", body)
	}
}

func TestStringAttributeFieldDecodes(t *testing.T) {
	b := newTraceBuilder()
	b.resource(project("acme", "llm"), "s", 1)
	body := encoded(t, b.td)
	rs, err := children(body, fieldResourceSpans)
	require.NoError(t, err)
	ss, err := children(rs[0], fieldScopeSpans)
	require.NoError(t, err)
	spans, err := children(ss[0], fieldSpans)
	require.NoError(t, err)

	span := append(append([]byte(nil), spans[0]...), stringAttributeField("wandb.wb_run_id", "run42")...)
	ssOut := appendLenField(nil, fieldSpans, span)
	rsOut := appendLenField(nil, fieldScopeSpans, ssOut)
	got := decodeRequest(t, appendLenField(nil, fieldResourceSpans, rsOut))
	attrs := got.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().AsRaw()
	assert.Equal(t, map[string]any{"megatron.iteration": int64(1), "megatron.loss": 2.25, "wandb.wb_run_id": "run42"}, attrs)
}

// copyOf is tracesOf into a new ptrace.Traces.
func copyOf(b *batch, refs []spanRef) ptrace.Traces {
	out := ptrace.NewTraces()
	b.tracesOf(out, refs)
	return out
}
