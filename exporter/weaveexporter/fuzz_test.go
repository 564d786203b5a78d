// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package weaveexporter

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// FuzzRenameConflicts: for any set of attribute keys (one per line of the
// input), the rename leaves no key that is a dotted prefix of another (what
// Weave rejects), keeps every value, and is deterministic.
func FuzzRenameConflicts(f *testing.F) {
	for _, s := range []string{
		"slurm.job.id\nslurm.job.id.raw",
		"a\na.b\na.b.c",
		"a\na.b\na._value",
		"a\na._value\na._value2\na.b",
		"nemo.run.id\nnemo.run.id.source",
		".\n..\na.\na..b",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input string) {
		build := func() pcommon.Map {
			m := pcommon.NewMap()
			for i, k := range strings.Split(input, "\n") {
				m.PutInt(k, int64(i))
			}
			return m
		}
		m := build()
		values := map[int64]bool{}
		for _, v := range m.All() {
			values[v.Int()] = true
		}
		renameConflicts(m)

		keys := make([]string, 0, m.Len())
		for k, v := range m.All() {
			keys = append(keys, k)
			if !values[v.Int()] {
				t.Fatalf("value %d appeared from nowhere", v.Int())
			}
			delete(values, v.Int())
		}
		if len(values) != 0 {
			t.Fatalf("values lost by the rename: %v (keys now %q)", values, keys)
		}
		if keysConflict(keys) {
			t.Fatalf("keys still conflict after the rename: %q", keys)
		}
		again := build()
		renameConflicts(again)
		if again.Len() != m.Len() {
			t.Fatalf("rename is not deterministic")
		}
		for k, v := range m.All() {
			if w, ok := again.Get(k); !ok || w.Int() != v.Int() {
				t.Fatalf("rename is not deterministic at %q", k)
			}
		}
	})
}

// FuzzRequestEncoding: for any batch (its shape, attribute sizes and names
// come from the fuzzer), the requests spliced from its protobuf encoding
// decode with the stock OTLP unmarshaler into exactly the spans routed to
// their project, under their resource and scope, changed only as the
// exporter promises (entity/project defaults, run linking, key renames).
// Every routed span is sent once and in batch order, a request holding more
// than one span is within the size limit, and the stream reads the same
// bytes as the assembled request.
func FuzzRequestEncoding(f *testing.F) {
	for _, seed := range []struct {
		shape   []byte
		name    string
		pad     uint16
		limit   uint16
		options uint8
	}{
		// One project, sent as encoded.
		{[]byte{1, 0x00, 1, 4 << 2}, "megatron", 0, 1 << 15, 0},
		// One project, spans changed on the way (run linked, renamed): no
		// longer the encoded batch.
		{[]byte{1, 0x08, 1, 3 << 2, 0x00, 0x10, 0x20}, "megatron", 0, 1 << 15, 4},
		// One project, a resource changed on the way (entity default).
		{[]byte{2, 0x02, 1, 2 << 2, 0x00, 0x00, 0x00, 1, 1 << 2, 0x00}, "megatron", 0, 1 << 15, 1},
		// Two projects and spans without one; scopes with schema URLs and attributes.
		{[]byte{3, 0x40, 2, 5<<2 | 1, 0x03, 0x05, 0x07, 0x09, 0x0f, 3<<2 | 2, 0x01, 0x02, 0x03, 0x01, 1, 4 << 2, 0x0f, 0x0f, 0x0f, 0x0f, 0x05, 1, 2 << 2}, "nemo", 300, 2048, 0},
		// Entity and project defaults, run ids without run_id_attribute.
		{[]byte{3, 0x02, 1, 4 << 2, 1, 2, 3, 4, 0x03, 1, 2 << 2, 0x10, 0x20, 0x04, 1, 1 << 2}, "run:7", 100, 1024, 3},
		// Run linking: appended, with a rename, a span's own run id, a bad run id.
		{[]byte{2, 0x08, 1, 5 << 2, 0x00, 0x10, 0x20, 0x30, 0x40, 0x18, 1, 3 << 2, 0xc0}, "r42", 64, 900, 4},
		// Every rename and every size, each span alone.
		{[]byte{1, 0xe8, 3, 5<<2 | 2, 0x0f, 0x1f, 0x4f, 0x8f, 0xff, 0x03, 2<<2 | 1, 1, 2}, "ckpt", 2000, 1, 7},
		// Empty resources and scopes.
		{[]byte{4, 0x00, 0, 0x00, 1, 0, 0x00, 1, 1 << 2, 0x00, 0x00, 2, 0, 0}, "", 0, 512, 0},
		// Many small spans cut close to the limit.
		{[]byte{2, 0x00, 3, 5 << 2, 1, 2, 3, 4, 5, 5 << 2, 6, 7, 8, 9, 10, 5 << 2, 11, 12, 13, 14, 15, 0x01, 2, 5 << 2, 1, 3, 5, 7, 9, 5 << 2, 2, 4, 6, 8, 10}, "step", 40, 700, 0},
	} {
		f.Add(seed.shape, seed.name, seed.pad, seed.limit, seed.options)
	}
	f.Fuzz(func(t *testing.T, shape []byte, name string, pad, limit uint16, options uint8) {
		r := router{}
		if options&1 != 0 {
			r.entity = "acme"
		}
		if options&2 != 0 {
			r.project = "llm"
		}
		if options&4 != 0 {
			r.runIDAttribute = "nemo.run.id"
		}
		maxBytes := int(limit) + 1
		td := fuzzTraces((*fuzzShape)(&shape), name, int(pad)%2048)
		td.MarkReadOnly()
		before := encoded(t, td)

		routed, dropped := routeOf(td, r)
		b, err := r.split(td)
		require.NoError(t, err)
		unroutable := ptrace.NewTraces()
		b.unroutableTraces(unroutable)
		require.Equal(t, dropped, unroutable.SpanCount(), "spans without a project")

		sent := map[projectKey][]pcommon.SpanID{}
		for _, req := range b.requests(maxBytes) {
			body := b.encode(req)
			stream, size := b.stream(req)
			require.Equal(t, len(body), size, "the size the stream announces")
			require.NoError(t, iotest.TestReader(stream, body), "the stream reads the same bytes however it is read")
			if len(req.refs) > 1 {
				require.LessOrEqual(t, len(body), maxBytes, "a request of %d spans over the limit", len(req.refs))
			}
			got, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(body)
			require.NoError(t, err, "a spliced request does not decode")

			want := sentAs(b, r, req.refs)
			if req.whole {
				// The batch as it came, empty resources and scopes included:
				// right only when nothing changes on the way.
				require.Equal(t, encoded(t, copyOf(b, req.refs)), encoded(t, want), "a changed batch sent as encoded")
				want = td
			}
			require.Equal(t, tracesJSON(t, want), tracesJSON(t, got), "decoded request differs from its spans as sent")
			require.Equal(t, encoded(t, want), encoded(t, got), "decoded request differs from its spans as sent")

			for i := 0; i < got.ResourceSpans().Len(); i++ {
				rs := got.ResourceSpans().At(i)
				attrs := rs.Resource().Attributes()
				entity, _ := attrs.Get(attrEntity)
				project, _ := attrs.Get(attrProject)
				got := projectKey{entity: entity.AsString(), project: project.AsString()}
				require.Equal(t, req.key, got, "a resource in another project's request")
				forEachSpan(rs, func(s ptrace.Span) { sent[req.key] = append(sent[req.key], s.SpanID()) })
			}
		}
		require.Equal(t, routed, sent, "every routed span once, in batch order, to its project")
		require.Equal(t, before, encoded(t, td), "the incoming batch must not change")
	})
}

// tracesJSON shows td in OTLP JSON, for a readable diff.
func tracesJSON(t *testing.T, td ptrace.Traces) string {
	b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	require.NoError(t, err)
	return string(b)
}

// fuzzShape hands out the fuzzer's bytes one decision at a time; past the
// end every decision is 0, which ends the batch.
type fuzzShape []byte

func (s *fuzzShape) next() byte {
	if len(*s) == 0 {
		return 0
	}
	c := (*s)[0]
	*s = (*s)[1:]
	return c
}

// fuzzTraces builds a batch from shape: a byte for the number of resources,
// then for each resource a byte for its project (low 3 bits), run id,
// conflicting keys, schema URL and size, a byte for its number of scopes,
// and for each scope a byte for its schema URL, size and number of spans;
// each span's byte sets its size (low 4 bits), conflicting keys, own run id,
// event and link. pad scales every size.
func fuzzTraces(shape *fuzzShape, name string, pad int) ptrace.Traces {
	td := ptrace.NewTraces()
	var id uint64
	for range shape.next() % 6 {
		rs := td.ResourceSpans().AppendEmpty()
		c := shape.next()
		attrs := rs.Resource().Attributes()
		attrs.PutStr(attrService, name)
		switch c & 0x07 { // 5, 6 and 7: neither
		case 0:
			attrs.PutStr(attrEntity, "acme")
			attrs.PutStr(attrProject, "llm")
		case 1:
			attrs.PutStr(attrEntity, "acme")
			attrs.PutStr(attrProject, "rl")
		case 2:
			attrs.PutStr(attrProject, "llm")
		case 3:
			attrs.PutStr(attrEntity, "acme")
		case 4:
			attrs.PutStr(attrEntity, "")
			attrs.PutStr(attrProject, "rl")
		}
		if c&0x08 != 0 {
			runID := "run-" + name
			if c&0x10 != 0 {
				runID = "acme/llm/" + runID
			}
			attrs.PutStr("nemo.run.id", runID)
		}
		if c&0x20 != 0 {
			attrs.PutStr("slurm.job.id", "4242")
			attrs.PutStr("slurm.job.id.raw", "4242_7")
		}
		if c&0x40 != 0 {
			rs.SetSchemaUrl("https://opentelemetry.io/schemas/1.26.0")
		}
		if c&0x80 != 0 {
			attrs.PutStr("pad", strings.Repeat("r", pad))
		}
		for j := range shape.next() % 4 {
			ss := rs.ScopeSpans().AppendEmpty()
			sc := shape.next()
			ss.Scope().SetName(fmt.Sprintf("%s.%d", name, j))
			if sc&1 != 0 {
				ss.SetSchemaUrl("https://example.com/scope")
			}
			if sc&2 != 0 {
				ss.Scope().Attributes().PutStr("pad", strings.Repeat("s", pad))
			}
			for range (sc >> 2) % 6 {
				sp := shape.next()
				id++
				span := ss.Spans().AppendEmpty()
				span.SetName(fmt.Sprintf("%s-%d", name, id))
				var tid [16]byte
				var sid [8]byte
				binary.BigEndian.PutUint64(tid[8:], id)
				binary.BigEndian.PutUint64(sid[:], id)
				span.SetTraceID(pcommon.TraceID(tid))
				span.SetSpanID(pcommon.SpanID(sid))
				span.Attributes().PutInt("megatron.iteration", int64(id))
				span.Attributes().PutStr("pad", strings.Repeat("x", pad*int(sp&0x0f)/8))
				if sp&0x10 != 0 {
					span.Attributes().PutStr("megatron", name)
				}
				if sp&0x20 != 0 {
					span.Attributes().PutStr(attrRunID, "own-"+name)
				}
				if sp&0x40 != 0 {
					ev := span.Events().AppendEmpty()
					ev.SetName(name)
					ev.Attributes().PutStr("ckpt", "/ckpt/1")
					if sp&0x80 != 0 {
						ev.Attributes().PutInt("ckpt.bytes", 1<<30)
					}
				}
				if sp&0x80 != 0 {
					lk := span.Links().AppendEmpty()
					lk.SetTraceID(pcommon.TraceID(tid))
					lk.Attributes().PutStr("peer", name)
					lk.Attributes().PutStr("peer.stage", "pp1")
				}
			}
		}
	}
	return td
}

// routeOf says, independently of the router, which project each span of td
// goes to (in batch order) and how many spans have none.
func routeOf(td ptrace.Traces, r router) (map[projectKey][]pcommon.SpanID, int) {
	routed := map[projectKey][]pcommon.SpanID{}
	dropped := 0
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		attrs := rs.Resource().Attributes()
		key := projectKey{entity: r.entity, project: r.project}
		if v, ok := attrs.Get(attrEntity); ok && v.AsString() != "" {
			key.entity = v.AsString()
		}
		if v, ok := attrs.Get(attrProject); ok && v.AsString() != "" {
			key.project = v.AsString()
		}
		forEachSpan(rs, func(s ptrace.Span) {
			if key.entity == "" || key.project == "" {
				dropped++
				return
			}
			routed[key] = append(routed[key], s.SpanID())
		})
	}
	return routed, dropped
}

// sentAs is what Weave must receive for refs, built with pdata: the spans as
// they came, under their resource and scope, with the entity/project
// defaults on resources lacking them, wandb.wb_run_id from run_id_attribute
// (when it is a bare run id) on spans lacking it, and conflicting keys
// renamed.
func sentAs(b *batch, r router, refs []spanRef) ptrace.Traces {
	td := copyOf(b, refs)
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		attrs := rs.Resource().Attributes()
		runID := ""
		if v, ok := attrs.Get(r.runIDAttribute); r.runIDAttribute != "" && ok && !strings.ContainsAny(v.AsString(), "/:") {
			runID = v.AsString()
		}
		if v, ok := attrs.Get(attrEntity); !ok || v.AsString() == "" {
			attrs.PutStr(attrEntity, r.entity)
		}
		if v, ok := attrs.Get(attrProject); !ok || v.AsString() == "" {
			attrs.PutStr(attrProject, r.project)
		}
		renameConflicts(attrs)
		forEachSpan(rs, func(s ptrace.Span) {
			if _, has := s.Attributes().Get(attrRunID); runID != "" && !has {
				s.Attributes().PutStr(attrRunID, runID)
			}
			renameSpanConflicts(s)
		})
	}
	return td
}
