// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package weaveexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/weaveexporter"

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// Requests are assembled from the protobuf encoding of the incoming batch
// instead of from copies of its pdata, which would cost several times the
// marshaling itself. This relies only on the OTLP wire format:
//
//	ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
//	ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; string schema_url = 3; }
//	ScopeSpans    { InstrumentationScope scope = 1; repeated Span spans = 2; string schema_url = 3; }
//	Span          { ...; repeated KeyValue attributes = 9; ... }
//
// pdata encodes every element of a repeated field, in order, so the n-th
// resource_spans field is td.ResourceSpans().At(n), and so on down to spans.
// Fields other than the repeated children are kept verbatim as a "header".
const (
	fieldResourceSpans  protowire.Number = 1
	fieldResource       protowire.Number = 1
	fieldScopeSpans     protowire.Number = 2
	fieldSpans          protowire.Number = 2
	fieldSpanAttributes protowire.Number = 9
	fieldKeyValueKey    protowire.Number = 1
	fieldKeyValueValue  protowire.Number = 2
	fieldAnyValueString protowire.Number = 1
)

var errMalformed = errors.New("malformed protobuf")

// splitMessage walks the fields of one message. Every field numbered child
// and of wire type bytes is passed to onChild with its payload; all other
// fields are appended, tag included, to the returned header, except those
// numbered drop (0 keeps all).
func splitMessage(msg []byte, child, drop protowire.Number, header []byte, onChild func(payload []byte)) ([]byte, error) {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return nil, fmt.Errorf("%w: %w", errMalformed, protowire.ParseError(n))
		}
		m := protowire.ConsumeFieldValue(num, typ, msg[n:])
		if m < 0 {
			return nil, fmt.Errorf("%w: %w", errMalformed, protowire.ParseError(m))
		}
		field := msg[:n+m]
		msg = msg[n+m:]
		switch {
		case num == child && typ == protowire.BytesType:
			payload, _ := protowire.ConsumeBytes(field[n:])
			onChild(payload)
		case num == drop:
		default:
			header = append(header, field...)
		}
	}
	return header, nil
}

// children returns the payloads of the fields numbered child in msg.
func children(msg []byte, child protowire.Number) ([][]byte, error) {
	var out [][]byte
	_, err := splitMessage(msg, child, 0, nil, func(p []byte) { out = append(out, p) })
	return out, err
}

// lenFieldSize is the encoded size of a bytes field (single-byte tag) holding n bytes.
func lenFieldSize(n int) int {
	return 1 + protowire.SizeVarint(uint64(n)) + n
}

// appendLenField appends a bytes field with a single-byte tag.
func appendLenField(b []byte, num protowire.Number, payload ...[]byte) []byte {
	n := 0
	for _, p := range payload {
		n += len(p)
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(n))
	for _, p := range payload {
		b = append(b, p...)
	}
	return b
}

func appendLenPrefix(b []byte, num protowire.Number, n int) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendVarint(b, uint64(n))
}

// stringAttributeField encodes `attributes` entry key=value of a Span, ready
// to be appended to an encoded Span: a repeated field may appear anywhere in
// a message, and a parser appends it to the others.
func stringAttributeField(key, value string) []byte {
	anyValue := protowire.AppendString(protowire.AppendTag(nil, fieldAnyValueString, protowire.BytesType), value)
	kv := protowire.AppendString(protowire.AppendTag(nil, fieldKeyValueKey, protowire.BytesType), key)
	kv = appendLenField(kv, fieldKeyValueValue, anyValue)
	return appendLenField(nil, fieldSpanAttributes, kv)
}
