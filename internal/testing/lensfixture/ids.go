// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package lensfixture

import (
	"encoding/binary"
	"hash/fnv"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Kind says what a span id belongs to: a step's subtree or the job spans.
type Kind byte

const (
	KindStep Kind = 1
	KindJob  Kind = 2
)

// Indexes of the job spans in their ids.
const (
	PretrainIndex = iota
	ModelInitIndex
	TrainIndex
	CheckpointIndex
	CheckpointLoadIndex
	EvaluationIndex
)

// SpanID says what the span is, so that a test reads its output back:
// [kind, rank (2 bytes), iteration (3 bytes), index (2 bytes)]. For a step,
// index is the span's place in Step.Plans (0: the step span).
func SpanID(kind Kind, rank, iteration int64, index int) pcommon.SpanID {
	var id pcommon.SpanID
	id[0] = byte(kind)
	binary.BigEndian.PutUint16(id[1:3], uint16(rank))
	id[3], id[4], id[5] = byte(iteration>>16), byte(iteration>>8), byte(iteration)
	binary.BigEndian.PutUint16(id[6:8], uint16(index))
	return id
}

// SpanInfo is what SpanID put into an id.
type SpanInfo struct {
	Kind            Kind
	Rank, Iteration int64
	Index           int
}

// ParseSpanID reads back an id made by SpanID.
func ParseSpanID(id pcommon.SpanID) SpanInfo {
	return SpanInfo{
		Kind:      Kind(id[0]),
		Rank:      int64(binary.BigEndian.Uint16(id[1:3])),
		Iteration: int64(id[3])<<16 | int64(id[4])<<8 | int64(id[5]),
		Index:     int(binary.BigEndian.Uint16(id[6:8])),
	}
}

// traceID is a rank's trace: its job trace (iteration < 0, or any
// iteration when steps are not roots) or one step's own trace.
// [hash of run and group (8 bytes), rank (2 bytes), iteration+1 (4 bytes), 0, 1].
func traceID(r Rank, shape Shape, iteration int64) pcommon.TraceID {
	h := fnv.New64a()
	_, _ = h.Write([]byte(r.Run + "\x00" + r.Group))
	var id pcommon.TraceID
	binary.BigEndian.PutUint64(id[0:8], h.Sum64())
	binary.BigEndian.PutUint16(id[8:10], uint16(r.Rank))
	if shape.StepsAreRoots && iteration >= 0 {
		binary.BigEndian.PutUint32(id[10:14], uint32(iteration+1))
	}
	id[15] = 1
	return id
}
