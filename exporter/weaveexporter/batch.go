package weaveexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/weaveexporter"

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"
)

const (
	attrEntity   = "wandb.entity"
	attrProject  = "wandb.project"
	attrRunID    = "wandb.wb_run_id"
	attrService  = "service.name"
	attrInstance = "service.instance.id"

	// maxVarint32 bounds the size of a length prefix when packing requests.
	maxVarint32 = 5
)

// projectKey is the Weave project a request is written to.
type projectKey struct {
	entity, project string
}

func (k projectKey) String() string { return k.entity + "/" + k.project }

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
// incoming batch (or of a sanitised copy) followed by fields to append.
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

// droppedSpans describes spans left out because no project could be found.
type droppedSpans struct {
	count    int
	missing  string
	service  string
	instance string
}

// runIDProblem describes a resource whose spans could not be linked to a run.
type runIDProblem struct {
	spans   int
	reason  string
	service string
}

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
	dropped   droppedSpans
	renamed   map[renamedKey]struct{}
	runIDs    []runIDProblem
}

// router turns an incoming batch into per-project Weave requests, applying
// the entity/project defaults, run linking and key renames.
type router struct {
	entity, project string
	runIDAttribute  string
}

// resourcePlan is what happens to one ResourceSpans.
type resourcePlan struct {
	key                   projectKey
	addEntity, addProject bool
	runIDField            []byte // encoded wandb.wb_run_id attribute, nil when not linking
	runID                 string
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
		plans[i], ok = r.plan(b, rss.At(i))
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

// plan decides where the spans of rs go and what changes on the way. It
// returns false when the resource has no entity or project: its spans are
// recorded in b.dropped.
func (r *router) plan(b *batch, rs ptrace.ResourceSpans) (resourcePlan, bool) {
	attrs := rs.Resource().Attributes()
	var p resourcePlan
	entity, hasEntity := attrString(attrs.Get(attrEntity))
	if !hasEntity && r.entity != "" {
		entity, p.addEntity = r.entity, true
	}
	project, hasProject := attrString(attrs.Get(attrProject))
	if !hasProject && r.project != "" {
		project, p.addProject = r.project, true
	}
	if entity == "" || project == "" {
		b.unchanged = false
		if n := spanCount(rs); n > 0 {
			var missing []string
			if entity == "" {
				missing = append(missing, attrEntity)
			}
			if project == "" {
				missing = append(missing, attrProject)
			}
			b.dropped.count += n
			b.dropped.missing = strings.Join(missing, " and ")
			b.dropped.service, _ = attrString(attrs.Get(attrService))
			b.dropped.instance, _ = attrString(attrs.Get(attrInstance))
		}
		return p, false
	}
	p.key = projectKey{entity: entity, project: project}
	if r.runIDAttribute != "" {
		id, present := attrString(attrs.Get(r.runIDAttribute))
		switch {
		case !present:
			b.runIDs = append(b.runIDs, r.runIDProblem(rs, "the resource has no (or an empty) "+r.runIDAttribute+" attribute"))
		case strings.ContainsAny(id, "/:"):
			b.runIDs = append(b.runIDs, r.runIDProblem(rs, fmt.Sprintf("%s=%q is not a bare W&B run id (it contains / or :)", r.runIDAttribute, id)))
		default:
			p.runID = id
			p.runIDField = stringAttributeField(attrRunID, id)
		}
	}
	return p, true
}

func (r *router) runIDProblem(rs ptrace.ResourceSpans, reason string) runIDProblem {
	service, _ := attrString(rs.Resource().Attributes().Get(attrService))
	return runIDProblem{spans: spanCount(rs), reason: reason, service: service}
}

// attrString returns an attribute's value as a string, and whether it is
// present and not empty.
func attrString(v pcommon.Value, ok bool) (string, bool) {
	if !ok {
		return "", false
	}
	s := v.AsString()
	return s, s != ""
}

func spanCount(rs ptrace.ResourceSpans) int {
	n := 0
	for j := 0; j < rs.ScopeSpans().Len(); j++ {
		n += rs.ScopeSpans().At(j).Spans().Len()
	}
	return n
}

// encodeResource fills out with the encoded header and scopes of rs, whose
// encoding is rsField, re-encoding the resource when plan changes it. It
// reports whether resource keys were renamed.
func (r *router) encodeResource(b *batch, rs ptrace.ResourceSpans, plan *resourcePlan, rsField []byte, out *encodedResource) (bool, error) {
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
	out.header = append(header, newResource...)
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

// spanRewrite collects spans that need a sanitised copy, so that all copies
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

// request is one HTTP request's worth of spans, all in one project.
type request struct {
	key   projectKey
	refs  []spanRef
	whole bool // refs are all of batch.body, unchanged
}

// requests packs every group into requests of at most limit bytes (a
// single span bigger than limit travels alone).
func (b *batch) requests(limit int) []request {
	if b.unchanged && len(b.groups) == 1 && len(b.body) <= limit {
		return []request{{key: b.groups[0].key, refs: b.groups[0].refs, whole: true}}
	}
	var out []request
	for _, g := range b.groups {
		for _, refs := range b.pack(g.refs, limit) {
			out = append(out, request{key: g.key, refs: refs})
		}
	}
	return out
}

// pack cuts refs into runs whose encoding is at most limit bytes. Length
// prefixes are counted at their largest, so the bound always holds.
func (b *batch) pack(refs []spanRef, limit int) [][]spanRef {
	var out [][]spanRef
	start, size := 0, 0
	curRS, curSS := int32(-1), int32(-1)
	for i, ref := range refs {
		cost := lenFieldSize(b.span(ref).size())
		wrap := 0
		if ref.rs != curRS {
			wrap += b.resourceOverhead(ref)
		}
		if ref.rs != curRS || ref.ss != curSS {
			wrap += b.scopeOverhead(ref)
		}
		if i > start && size+wrap+cost > limit {
			out = append(out, refs[start:i])
			start, size = i, 0
			wrap = b.resourceOverhead(ref) + b.scopeOverhead(ref)
		}
		size += wrap + cost
		curRS, curSS = ref.rs, ref.ss
	}
	if start < len(refs) {
		out = append(out, refs[start:])
	}
	return out
}

func (b *batch) span(ref spanRef) encodedSpan {
	return b.spans[b.resources[ref.rs].scopes[ref.ss].first+int(ref.span)]
}

func (b *batch) resourceOverhead(ref spanRef) int {
	return 1 + maxVarint32 + len(b.resources[ref.rs].header)
}

func (b *batch) scopeOverhead(ref spanRef) int {
	return 1 + maxVarint32 + len(b.resources[ref.rs].scopes[ref.ss].header)
}

// stream returns the ExportTraceServiceRequest holding req.refs, which must
// be in batch order, as a stream read straight from the batch (no copy of
// the request is assembled), and its size.
func (b *batch) stream(req request) (io.Reader, int) {
	if req.whole {
		return bytes.NewReader(b.body), len(b.body)
	}
	// Each length prefix precedes its content: measure every resource and
	// scope run first.
	refs := req.refs
	sizes := make([]int, 0, 8)
	total := 0
	for i := 0; i < len(refs); {
		rs := refs[i].rs
		res := &b.resources[rs]
		at := len(sizes)
		sizes = append(sizes, 0)
		rsSize := len(res.header)
		for i < len(refs) && refs[i].rs == rs {
			ss := refs[i].ss
			ssAt := len(sizes)
			sizes = append(sizes, 0)
			ssSize := len(res.scopes[ss].header)
			for ; i < len(refs) && refs[i].rs == rs && refs[i].ss == ss; i++ {
				ssSize += lenFieldSize(b.span(refs[i]).size())
			}
			sizes[ssAt] = ssSize
			rsSize += lenFieldSize(ssSize)
		}
		sizes[at] = rsSize
		total += lenFieldSize(rsSize)
	}
	return &requestStream{b: b, refs: refs, sizes: sizes}, total
}

// encode returns the whole encoding of req.
func (b *batch) encode(req request) []byte {
	r, size := b.stream(req)
	out := make([]byte, size)
	_, _ = io.ReadFull(r, out)
	return out
}

// requestStream reads an encoded request piece by piece: the length-prefixed
// resource and scope headers and the spans, in refs order.
type requestStream struct {
	b     *batch
	refs  []spanRef
	sizes []int // resource and scope body sizes, in the order they open
	i     int   // next ref to queue
	next  int   // next entry of sizes

	pieces [7][]byte // queued for the current ref
	n, at  int       // pieces queued, next piece
	prefix [3][1 + binary.MaxVarintLen32]byte
}

func (s *requestStream) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if s.at < s.n {
			c := copy(p[n:], s.pieces[s.at])
			n += c
			s.pieces[s.at] = s.pieces[s.at][c:]
			if len(s.pieces[s.at]) == 0 {
				s.at++
			}
			continue
		}
		if s.i == len(s.refs) {
			if n == 0 {
				return 0, io.EOF
			}
			return n, nil
		}
		s.queue()
	}
	return n, nil
}

// queue lines up the pieces of the next ref: the headers of the resource
// and scope it opens, if any, then the span.
func (s *requestStream) queue() {
	ref := s.refs[s.i]
	res := &s.b.resources[ref.rs]
	s.n, s.at = 0, 0
	newResource := s.i == 0 || s.refs[s.i-1].rs != ref.rs
	if newResource {
		s.push(appendLenPrefix(s.prefix[0][:0], fieldResourceSpans, s.sizes[s.next]), res.header)
		s.next++
	}
	if newResource || s.refs[s.i-1].ss != ref.ss {
		s.push(appendLenPrefix(s.prefix[1][:0], fieldScopeSpans, s.sizes[s.next]), res.scopes[ref.ss].header)
		s.next++
	}
	span := s.b.span(ref)
	s.push(appendLenPrefix(s.prefix[2][:0], fieldSpans, span.size()), span.body, span.extra)
	s.i++
}

func (s *requestStream) push(pieces ...[]byte) {
	for _, p := range pieces {
		if len(p) > 0 {
			s.pieces[s.n] = p
			s.n++
		}
	}
}

func appendLenPrefix(b []byte, num protowire.Number, n int) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendVarint(b, uint64(n))
}

// tracesOf copies the spans refs point at, with their resource and scope,
// from the incoming batch: what is left to send when a retryable error
// stops a push part-way.
func (b *batch) tracesOf(refs []spanRef) ptrace.Traces {
	out := ptrace.NewTraces()
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
	return out
}

func (b *batch) spanName(ref spanRef) string {
	return b.td.ResourceSpans().At(int(ref.rs)).ScopeSpans().At(int(ref.ss)).Spans().At(int(ref.span)).Name()
}
