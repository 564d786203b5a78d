// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package weaveexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/weaveexporter"

import (
	"bytes"
	"encoding/binary"
	"io"
)

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
