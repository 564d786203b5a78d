// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package weaveexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/weaveexporter"

import (
	"fmt"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"
)

// batch is one incoming ptrace.Traces regrouped into Weave requests.
type batch struct {
	td        ptrace.Traces
	body      []byte // protobuf encoding of td
	resources []encodedResource
	spans     []encodedSpan
	groups    []*projectGroup
	refCount  int
	// unchanged is true when every span is sent as it came, under its
	// resource as it came, so a request holding all of them is body itself.
	unchanged bool
	// unroutable are the resources (indexes in td) with spans but no
	// entity or project.
	unroutable []int32
	renamed    map[renamedKey]struct{}
	runIDs     []runIDProblem
}

// What was changed in a span on its way to Weave, for the internal metrics.
const (
	spanRenamed uint8 = 1 << iota // a key of the span, its events, links or resource was renamed
	spanLinked                    // wandb.wb_run_id was added from run_id_attribute
)

// spanRef points at one span of the incoming batch: indexes of its
// ResourceSpans, ScopeSpans and Span.
type spanRef struct {
	rs, ss, span int32
	flags        uint8
}

// encodedSpan is a Span message as it will be sent: its encoding in the
// incoming batch (or of a sanitized copy) followed by fields to append.
type encodedSpan struct {
	body  []byte
	extra []byte
}

func (s encodedSpan) size() int { return len(s.body) + len(s.extra) }

type encodedScope struct {
	header []byte // ScopeSpans fields other than spans
	first  int    // index of its first span in batch.spans
}

type encodedResource struct {
	header []byte // ResourceSpans fields other than scope_spans
	scopes []encodedScope
}

// projectGroup holds the spans of a batch that go to one Weave project, in
// batch order.
type projectGroup struct {
	key  projectKey
	refs []spanRef
}

// split regroups td. It never modifies td: changed resources and spans are
// copied into scratch pdata and re-encoded.
func (r *router) split(td ptrace.Traces) (*batch, error) {
	b := &batch{td: td, unchanged: true}
	rss := td.ResourceSpans()
	plans := make([]resourcePlan, rss.Len())
	skip := make([]bool, rss.Len())
	// Spans per project, to size each group's refs once.
	spansOf := make(map[projectKey]int)
	for i := 0; i < rss.Len(); i++ {
		var ok bool
		plans[i], ok = r.plan(b, i, rss.At(i))
		skip[i] = !ok
		if ok {
			spansOf[plans[i].key] += spanCount(rss.At(i))
		}
	}
	if len(spansOf) == 0 {
		return b, nil
	}

	body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		return nil, fmt.Errorf("marshal traces: %w", err)
	}
	b.body = body
	rsFields, err := children(body, fieldResourceSpans)
	if err != nil {
		return nil, err
	}
	if len(rsFields) != rss.Len() {
		return nil, fmt.Errorf("%w: %d resource_spans encoded for %d in the batch", errMalformed, len(rsFields), rss.Len())
	}
	b.resources = make([]encodedResource, rss.Len())
	b.spans = make([]encodedSpan, 0, td.SpanCount())
	b.groups = make([]*projectGroup, 0, len(spansOf))
	groupOf := make(map[projectKey]*projectGroup)

	var rewrite spanRewrite
	for i := 0; i < rss.Len(); i++ {
		if skip[i] {
			continue
		}
		rs := rss.At(i)
		plan := &plans[i]
		resourceRenamed, err := r.encodeResource(b, rs, plan, rsFields[i], &b.resources[i])
		if err != nil {
			return nil, err
		}
		group := groupOf[plan.key]
		if group == nil {
			group = &projectGroup{key: plan.key, refs: make([]spanRef, 0, spansOf[plan.key])}
			groupOf[plan.key] = group
			b.groups = append(b.groups, group)
		}
		scopes := rs.ScopeSpans()
		for j := 0; j < scopes.Len(); j++ {
			spans := scopes.At(j).Spans()
			first := b.resources[i].scopes[j].first
			for k := 0; k < spans.Len(); k++ {
				span := spans.At(k)
				var flags uint8
				added := ""
				if plan.runIDField != nil {
					if _, has := span.Attributes().Get(attrRunID); !has {
						flags |= spanLinked
						added = attrRunID
					}
				}
				switch {
				case spanHasConflict(span, added):
					flags |= spanRenamed
					rewrite.add(b, first+k, span, plan.runID, flags&spanLinked != 0)
				case flags&spanLinked != 0:
					b.spans[first+k].extra = plan.runIDField
				}
				if resourceRenamed {
					flags |= spanRenamed
				}
				if flags != 0 {
					b.unchanged = false
				}
				group.refs = append(group.refs, spanRef{rs: int32(i), ss: int32(j), span: int32(k), flags: flags})
			}
		}
	}
	if err := rewrite.encode(b); err != nil {
		return nil, err
	}
	b.refCount = 0
	for _, g := range b.groups {
		b.refCount += len(g.refs)
	}
	return b, nil
}

// encodeResource fills out with the encoded header and scopes of rs, whose
// encoding is rsField, re-encoding the resource when plan changes it. It
// reports whether resource keys were renamed.
func (*router) encodeResource(b *batch, rs ptrace.ResourceSpans, plan *resourcePlan, rsField []byte, out *encodedResource) (bool, error) {
	var newResource []byte
	var renames []keyRename
	if plan.addEntity || plan.addProject || mapHasConflict(rs.Resource().Attributes(), "") {
		var err error
		newResource, renames, err = rewriteResource(rs, plan)
		if err != nil {
			return false, err
		}
		b.unchanged = false
		for _, rn := range renames {
			b.noteRename(renamedKey{where: "resource", keyRename: rn})
		}
	}
	drop := protowire.Number(0)
	if newResource != nil {
		drop = fieldResource
	}
	var scopeFields [][]byte
	header, err := splitMessage(rsField, fieldScopeSpans, drop, nil, func(p []byte) { scopeFields = append(scopeFields, p) })
	if err != nil {
		return false, err
	}
	header = append(header, newResource...)
	out.header = header
	scopes := rs.ScopeSpans()
	if len(scopeFields) != scopes.Len() {
		return false, fmt.Errorf("%w: %d scope_spans encoded for %d in the batch", errMalformed, len(scopeFields), scopes.Len())
	}
	out.scopes = make([]encodedScope, len(scopeFields))
	for j, field := range scopeFields {
		first := len(b.spans)
		ssHeader, err := splitMessage(field, fieldSpans, 0, nil, func(p []byte) { b.spans = append(b.spans, encodedSpan{body: p}) })
		if err != nil {
			return false, err
		}
		if got, want := len(b.spans)-first, scopes.At(j).Spans().Len(); got != want {
			return false, fmt.Errorf("%w: %d spans encoded for %d in the batch", errMalformed, got, want)
		}
		out.scopes[j] = encodedScope{header: ssHeader, first: first}
	}
	return len(renames) > 0, nil
}

// rewriteResource returns the encoded resource field of rs with the
// entity/project defaults inserted and conflicting keys renamed.
func rewriteResource(rs ptrace.ResourceSpans, plan *resourcePlan) ([]byte, []keyRename, error) {
	scratch := ptrace.NewTraces()
	res := scratch.ResourceSpans().AppendEmpty().Resource()
	rs.Resource().CopyTo(res)
	if plan.addEntity {
		res.Attributes().PutStr(attrEntity, plan.key.entity)
	}
	if plan.addProject {
		res.Attributes().PutStr(attrProject, plan.key.project)
	}
	renames := renameConflicts(res.Attributes())
	enc, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(scratch)
	if err != nil {
		return nil, nil, fmt.Errorf("marshal resource: %w", err)
	}
	rsFields, err := children(enc, fieldResourceSpans)
	if err != nil || len(rsFields) != 1 {
		return nil, nil, fmt.Errorf("%w: re-encoded resource", errMalformed)
	}
	resources, err := children(rsFields[0], fieldResource)
	if err != nil || len(resources) != 1 {
		return nil, nil, fmt.Errorf("%w: re-encoded resource", errMalformed)
	}
	return appendLenField(nil, fieldResource, resources[0]), renames, nil
}

// spanRewrite collects spans that need a sanitized copy, so that all copies
// are encoded at once.
type spanRewrite struct {
	scratch ptrace.Traces
	spans   ptrace.SpanSlice
	targets []int // index in batch.spans of each copy
}

func (w *spanRewrite) add(b *batch, target int, span ptrace.Span, runID string, link bool) {
	if len(w.targets) == 0 {
		w.scratch = ptrace.NewTraces()
		w.spans = w.scratch.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	}
	cp := w.spans.AppendEmpty()
	span.CopyTo(cp)
	if link {
		cp.Attributes().PutStr(attrRunID, runID)
	}
	for _, rn := range renameSpanConflicts(cp) {
		b.noteRename(rn)
	}
	w.targets = append(w.targets, target)
}

func (w *spanRewrite) encode(b *batch) error {
	if len(w.targets) == 0 {
		return nil
	}
	enc, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(w.scratch)
	if err != nil {
		return fmt.Errorf("marshal spans: %w", err)
	}
	rsFields, err := children(enc, fieldResourceSpans)
	if err != nil || len(rsFields) != 1 {
		return fmt.Errorf("%w: re-encoded spans", errMalformed)
	}
	ssFields, err := children(rsFields[0], fieldScopeSpans)
	if err != nil || len(ssFields) != 1 {
		return fmt.Errorf("%w: re-encoded spans", errMalformed)
	}
	spans, err := children(ssFields[0], fieldSpans)
	if err != nil || len(spans) != len(w.targets) {
		return fmt.Errorf("%w: re-encoded spans", errMalformed)
	}
	for i, target := range w.targets {
		b.spans[target] = encodedSpan{body: spans[i]}
	}
	return nil
}

func (b *batch) noteRename(k renamedKey) {
	if b.renamed == nil {
		b.renamed = make(map[renamedKey]struct{})
	}
	b.renamed[k] = struct{}{}
}

func (b *batch) span(ref spanRef) encodedSpan {
	return b.spans[b.resources[ref.rs].scopes[ref.ss].first+int(ref.span)]
}

// tracesOf copies the spans refs point at, with their resource and scope,
// from the incoming batch, into out: what is left to send when a retryable
// error stops a push part-way.
func (b *batch) tracesOf(out ptrace.Traces, refs []spanRef) {
	rss := b.td.ResourceSpans()
	curRS, curSS := int32(-1), int32(-1)
	var dstRS ptrace.ResourceSpans
	var dstSS ptrace.ScopeSpans
	for _, ref := range refs {
		srcRS := rss.At(int(ref.rs))
		if ref.rs != curRS {
			dstRS = out.ResourceSpans().AppendEmpty()
			srcRS.Resource().CopyTo(dstRS.Resource())
			dstRS.SetSchemaUrl(srcRS.SchemaUrl())
			curRS, curSS = ref.rs, -1
		}
		srcSS := srcRS.ScopeSpans().At(int(ref.ss))
		if ref.ss != curSS {
			dstSS = dstRS.ScopeSpans().AppendEmpty()
			srcSS.Scope().CopyTo(dstSS.Scope())
			dstSS.SetSchemaUrl(srcSS.SchemaUrl())
			curSS = ref.ss
		}
		srcSS.Spans().At(int(ref.span)).CopyTo(dstSS.Spans().AppendEmpty())
	}
}

// unroutableTraces copies the resources without entity or project into out.
func (b *batch) unroutableTraces(out ptrace.Traces) {
	for _, i := range b.unroutable {
		b.td.ResourceSpans().At(int(i)).CopyTo(out.ResourceSpans().AppendEmpty())
	}
}

// sent is req as it was (or would have been) sent to Weave: with the
// entity, project and run id added and the keys renamed.
func (b *batch) sent(req request) (ptrace.Traces, error) {
	return (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(b.encode(req))
}

func (b *batch) spanName(ref spanRef) string {
	return b.td.ResourceSpans().At(int(ref.rs)).ScopeSpans().At(int(ref.ss)).Spans().At(int(ref.span)).Name()
}
