// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package weaveexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/weaveexporter"

// maxVarint32 bounds the size of a length prefix when packing requests.
const maxVarint32 = 5

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

func (b *batch) resourceOverhead(ref spanRef) int {
	return 1 + maxVarint32 + len(b.resources[ref.rs].header)
}

func (b *batch) scopeOverhead(ref spanRef) int {
	return 1 + maxVarint32 + len(b.resources[ref.rs].scopes[ref.ss].header)
}
