// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter"

import (
	"context"
	"fmt"
	"slices"

	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exporterhelper/xexporterhelper"

	"github.com/nemo-lens/otelcol-nemo/internal/pdatautil"
)

// resourcesRequest is what the exporter's sending queue holds: the
// resources of the batches it was handed, by reference, never moved.
//
// Written by hand because exporterhelper's own requests merge batches by
// moving their resources into one (MoveAndAppendTo), so an exporter with
// queue batching declares that it mutates its input. The collector then
// copies every batch for it whenever another consumer reads the same data:
// nemo_view next to this exporter in every preset, a copy of every span
// (all_ranks) and every step point. Merging references leaves the input as
// it was, so the exporter is read-only and nothing is copied.
//
// Batches split only between resources: a resource with more items than
// the batch's max_size goes out alone, whole.
type resourcesRequest[T any, R pdatautil.Resource] struct {
	sig       *signal[T, R]
	resources []R
	items     []int // items (spans, data points, log records) of each resource
	total     int   // sum of items
	bytes     int   // OTLP size of all resources; -1 until asked
}

// signal is what a resourcesRequest needs to know of one signal: T is its
// data (ptrace.Traces, ...), R a resource of it (ptrace.ResourceSpans, ...).
type signal[T any, R pdatautil.Resource] struct {
	// resources are the resources of a batch, by reference.
	resources func(T) []R
	// encode appends a resource's records as lines (recordEncoder).
	encode func(*recordEncoder, []byte, R) ([]byte, int)
	// retryErr is the error that tells exporterhelper to retry data
	// (consumererror.NewTraces, ...).
	retryErr func(error, T) error
	// items counts a resource's spans, data points or log records.
	items func(R) int
	// size is a resource's OTLP protobuf size (the bytes sizer).
	size func(R) int
	// data copies resources into a batch of their own (a retry's data, the
	// persistent queue's encoding).
	data func([]R) T
	// errData returns the data an error says to retry (consumererror.Traces, ...).
	errData func(error) (T, bool)
	// marshal and unmarshal are the persistent queue's encoding, the same
	// as exporterhelper's (xpdata's request format), so that a queue
	// written by either reads back.
	marshal   func(context.Context, T) ([]byte, error)
	unmarshal func([]byte) (context.Context, T, error)
}

// newRequest is a request of data's resources, by reference.
func (s *signal[T, R]) newRequest(data T) *resourcesRequest[T, R] {
	rs := s.resources(data)
	r := &resourcesRequest[T, R]{sig: s, resources: rs, items: make([]int, len(rs)), bytes: -1}
	for i, res := range rs {
		r.items[i] = s.items(res)
		r.total += r.items[i]
	}
	return r
}

// converter is the exporterhelper converter of this signal.
func (s *signal[T, R]) converter(_ context.Context, data T) (xexporterhelper.Request, error) {
	return s.newRequest(data), nil
}

// queueBatchSettings: the encoding for a persistent queue. No reference
// counter: a request holds its batches until they are written, so they
// must not go back to pdata's pool when the queue has read them.
func (s *signal[T, R]) queueBatchSettings() xexporterhelper.QueueBatchSettings {
	return xexporterhelper.QueueBatchSettings{Encoding: requestEncoding[T, R]{s}}
}

func (r *resourcesRequest[T, R]) ItemsCount() int { return r.total }

func (r *resourcesRequest[T, R]) BytesSize() int {
	if r.bytes < 0 {
		r.bytes = 0
		for _, res := range r.resources {
			r.bytes += r.sig.size(res)
		}
	}
	return r.bytes
}

// MergeSplit appends r2's resources to r's, then cuts the result into
// requests of at most maxSize (between resources).
func (r *resourcesRequest[T, R]) MergeSplit(_ context.Context, maxSize int, szt exporterhelper.RequestSizerType, r2 xexporterhelper.Request) ([]xexporterhelper.Request, error) {
	if szt != exporterhelper.RequestSizerTypeItems && szt != exporterhelper.RequestSizerTypeBytes {
		return nil, fmt.Errorf("jsonl_file batches by items or bytes, not %q", szt.String())
	}
	if r2 != nil {
		o, ok := r2.(*resourcesRequest[T, R])
		if !ok {
			return nil, fmt.Errorf("cannot merge a %T into a jsonl_file request", r2)
		}
		r.resources = append(r.resources, o.resources...)
		r.items = append(r.items, o.items...)
		r.total += o.total
		if r.bytes >= 0 && o.bytes >= 0 {
			r.bytes += o.bytes
		} else {
			r.bytes = -1
		}
	}
	if maxSize == 0 || r.size(szt) <= maxSize {
		return []xexporterhelper.Request{r}, nil
	}
	var out []xexporterhelper.Request
	start, n := 0, 0
	for i, res := range r.resources {
		s := r.items[i]
		if szt == exporterhelper.RequestSizerTypeBytes {
			s = r.sig.size(res)
		}
		if n > 0 && n+s > maxSize {
			out = append(out, r.part(start, i))
			start, n = i, 0
		}
		n += s
	}
	return append(out, r.part(start, len(r.resources))), nil
}

func (r *resourcesRequest[T, R]) size(szt exporterhelper.RequestSizerType) int {
	if szt == exporterhelper.RequestSizerTypeBytes {
		return r.BytesSize()
	}
	return r.total
}

// part is resources [from, to) as a request of their own, with slices of
// its own (a later merge appends to it).
func (r *resourcesRequest[T, R]) part(from, to int) *resourcesRequest[T, R] {
	p := &resourcesRequest[T, R]{sig: r.sig, resources: slices.Clone(r.resources[from:to]), items: slices.Clone(r.items[from:to]), bytes: -1}
	for _, n := range p.items {
		p.total += n
	}
	return p
}

// OnError is what exporterhelper retries after err: only the resources the
// error names when some were written (writeGroups), else all.
func (r *resourcesRequest[T, R]) OnError(err error) xexporterhelper.Request {
	if data, ok := r.sig.errData(err); ok {
		return r.sig.newRequest(data)
	}
	return r
}

// requestEncoding is the persistent queue's encoding of a resourcesRequest.
type requestEncoding[T any, R pdatautil.Resource] struct{ sig *signal[T, R] }

func (e requestEncoding[T, R]) Marshal(ctx context.Context, req xexporterhelper.Request) ([]byte, error) {
	r, ok := req.(*resourcesRequest[T, R])
	if !ok {
		return nil, fmt.Errorf("cannot encode a %T as a jsonl_file request", req)
	}
	return e.sig.marshal(ctx, e.sig.data(r.resources))
}

func (e requestEncoding[T, R]) Unmarshal(b []byte) (context.Context, xexporterhelper.Request, error) {
	ctx, data, err := e.sig.unmarshal(b)
	if err != nil {
		return ctx, nil, err
	}
	return ctx, e.sig.newRequest(data), nil
}
