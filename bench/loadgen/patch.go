// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
)

// A template is one pre-marshaled OTLP export request plus the places in its
// bytes that change from one replay to the next. Every field patched keeps its
// length, so enclosing length prefixes stay valid and a replay costs one copy
// and a few thousand fixed-size writes instead of a marshal.
type template struct {
	data    []byte
	patches []patch
	items   int
}

type patchKind uint8

const (
	// patchID XORs 8 bytes (a span id, or the low half of a trace id) with the replay's mask.
	patchID patchKind = iota
	// patchTime adds the replay's time shift to a fixed64 Unix-nanosecond timestamp.
	patchTime
	// patchIterVarint writes the iteration as a 5-byte varint (non-minimal
	// varints are valid protobuf; pdata and every OTLP decoder accept them).
	patchIterVarint
	// patchIterDigits writes the iteration as right-aligned decimal digits in a log body.
	patchIterDigits
)

type patch struct {
	off  int32
	kind patchKind
	// arg is the step index within the request, for iteration patches.
	arg int32
}

const varintWidth = 5

// maxIteration keeps patched iterations within the 8-digit log field (and so
// within the 5-byte varint).
const maxIteration = 99_999_999

// replay is what differs between two sends of one template.
type replay struct {
	mask      uint64 // XORed into span ids (and trace ids in per-step trace scope)
	shift     int64  // added to every timestamp, in ns
	iteration int64  // megatron.iteration of the request's first step
}

// render writes the template, patched for r, into dst (reusing its capacity).
func (t *template) render(dst []byte, r replay) []byte {
	dst = append(dst[:0], t.data...)
	for _, p := range t.patches {
		b := dst[p.off:]
		switch p.kind {
		case patchID:
			binary.LittleEndian.PutUint64(b, binary.LittleEndian.Uint64(b)^r.mask)
		case patchTime:
			binary.LittleEndian.PutUint64(b, binary.LittleEndian.Uint64(b)+uint64(r.shift))
		case patchIterVarint:
			putVarintWidth(b[:varintWidth], uint64(r.iteration+int64(p.arg)))
		case patchIterDigits:
			putDigits(b[:iterationDigitsWidth], r.iteration+int64(p.arg))
		}
	}
	return dst
}

// putVarintWidth encodes v as a varint of exactly len(b) bytes.
func putVarintWidth(b []byte, v uint64) {
	last := len(b) - 1
	for i := range last {
		b[i] = byte(v&0x7f) | 0x80
		v >>= 7
	}
	b[last] = byte(v & 0x7f)
}

// putDigits writes v right-aligned, space-padded, as Python's "%8d" does.
func putDigits(b []byte, v int64) {
	for i := len(b) - 1; i >= 0; i-- {
		if v == 0 && i < len(b)-1 {
			b[i] = ' '
			continue
		}
		b[i] = byte('0' + v%10)
		v /= 10
	}
}

// fieldFunc receives one field of a message: its number, wire type and the
// offsets of its value (for bytes: the payload; otherwise the encoded value).
type fieldFunc func(num protowire.Number, typ protowire.Type, start, end int) error

// eachField calls fn for every field of the message in buf[start:end].
func eachField(buf []byte, start, end int, fn fieldFunc) error {
	pos := start
	for pos < end {
		num, typ, n := protowire.ConsumeTag(buf[pos:end])
		if n < 0 {
			return fmt.Errorf("tag at %d: %w", pos, protowire.ParseError(n))
		}
		pos += n
		vs := pos
		if typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(buf[pos:end])
			if m < 0 {
				return fmt.Errorf("field %d at %d: %w", num, pos, protowire.ParseError(m))
			}
			vs = pos + m - len(v)
			pos += m
		} else {
			m := protowire.ConsumeFieldValue(num, typ, buf[pos:end])
			if m < 0 {
				return fmt.Errorf("field %d at %d: %w", num, pos, protowire.ParseError(m))
			}
			pos += m
		}
		if err := fn(num, typ, vs, pos); err != nil {
			return err
		}
	}
	return nil
}

// nested calls fn for the messages in field want of buf[start:end].
func nested(buf []byte, start, end int, want protowire.Number, fn func(start, end int) error) error {
	return eachField(buf, start, end, func(num protowire.Number, typ protowire.Type, s, e int) error {
		if num != want || typ != protowire.BytesType {
			return nil
		}
		return fn(s, e)
	})
}

// patchFinder collects the patch sites of one request.
type patchFinder struct {
	buf []byte
	// traceIDs says whether trace ids vary per replay (per-step trace scope).
	traceIDs bool
	patches  []patch
	spanIDs  map[uint64]struct{}
	parents  []int
}

func (f *patchFinder) add(off int, kind patchKind, arg int) {
	f.patches = append(f.patches, patch{off: int32(off), kind: kind, arg: int32(arg)})
}

func (f *patchFinder) fixed64(typ protowire.Type, start, end int) error {
	if typ != protowire.Fixed64Type || end-start != 8 {
		return errors.New("timestamp is not a fixed64")
	}
	f.add(start, patchTime, 0)
	return nil
}

func (f *patchFinder) id(start, end int, trace bool) {
	switch {
	case trace && end-start == 16 && f.traceIDs:
		f.add(start+8, patchID, 0)
	case !trace && end-start == 8:
		f.add(start, patchID, 0)
	}
}

var iterationKey = []byte(attrkey.MegatronIteration)

// attribute records the megatron.iteration value of a KeyValue as an iteration patch.
func (f *patchFinder) attribute(start, end int) error {
	var key []byte
	var valStart, valEnd int
	err := eachField(f.buf, start, end, func(num protowire.Number, _ protowire.Type, s, e int) error {
		switch num {
		case 1:
			key = f.buf[s:e]
		case 2:
			valStart, valEnd = s, e
		}
		return nil
	})
	if err != nil || !bytes.Equal(key, iterationKey) {
		return err
	}
	return eachField(f.buf, valStart, valEnd, func(num protowire.Number, typ protowire.Type, s, e int) error {
		if num != 3 || typ != protowire.VarintType {
			return nil
		}
		v, _ := protowire.ConsumeVarint(f.buf[s:e])
		if e-s != varintWidth || v < iterationPlaceholder {
			return fmt.Errorf("megatron.iteration %d was not built with the placeholder", v)
		}
		f.add(s, patchIterVarint, int(v-iterationPlaceholder))
		return nil
	})
}

// findPatches returns the patch sites of a marshaled export request of signal.
func findPatches(signal string, buf []byte, traceIDs bool) ([]patch, error) {
	f := &patchFinder{buf: buf, traceIDs: traceIDs, spanIDs: map[uint64]struct{}{}}
	var item func(start, end int) error
	switch signal {
	case signalTraces:
		item = f.span
	case signalMetrics:
		item = f.metric
	case signalLogs:
		item = f.logRecord
	default:
		return nil, fmt.Errorf("unknown signal %q", signal)
	}
	// Request.resource_X(1) -> ResourceX.scope_X(2) -> ScopeX.items(2).
	err := nested(buf, 0, len(buf), 1, func(s, e int) error {
		return nested(buf, s, e, 2, func(s, e int) error {
			return nested(buf, s, e, 2, item)
		})
	})
	if err != nil {
		return nil, err
	}
	f.resolveParents()
	return f.patches, nil
}

func (f *patchFinder) span(start, end int) error {
	return eachField(f.buf, start, end, func(num protowire.Number, typ protowire.Type, s, e int) error {
		switch num {
		case 1: // trace_id
			f.id(s, e, true)
		case 2: // span_id
			if e-s == 8 {
				f.spanIDs[binary.LittleEndian.Uint64(f.buf[s:e])] = struct{}{}
			}
			f.id(s, e, false)
		case 4: // parent_span_id: resolved once every span id is known
			if e-s == 8 {
				f.parents = append(f.parents, s)
			}
		case 7, 8: // start_time_unix_nano, end_time_unix_nano
			return f.fixed64(typ, s, e)
		case 9: // attributes
			return f.attribute(s, e)
		case 11: // events: time_unix_nano(1)
			return eachField(f.buf, s, e, func(num protowire.Number, typ protowire.Type, s, e int) error {
				if num == 1 {
					return f.fixed64(typ, s, e)
				}
				return nil
			})
		case 13: // links: trace_id(1), span_id(2)
			return eachField(f.buf, s, e, func(num protowire.Number, _ protowire.Type, s, e int) error {
				switch num {
				case 1:
					f.id(s, e, true)
				case 2:
					f.id(s, e, false)
				}
				return nil
			})
		}
		return nil
	})
}

// resolveParents patches the parent ids that name a span of the same request:
// those vary with their parent. A parent outside the request (the long-lived
// megatron.train span, parent of every step in per-rank trace scope) does not.
func (f *patchFinder) resolveParents() {
	for _, off := range f.parents {
		if _, ok := f.spanIDs[binary.LittleEndian.Uint64(f.buf[off:])]; ok {
			f.add(off, patchID, 0)
		}
	}
}

func (f *patchFinder) metric(start, end int) error {
	return eachField(f.buf, start, end, func(num protowire.Number, _ protowire.Type, s, e int) error {
		switch num {
		case 5, 7, 9, 10, 11: // gauge, sum, histogram, exponential_histogram, summary
			return nested(f.buf, s, e, 1, func(s, e int) error { // data_points
				return eachField(f.buf, s, e, func(num protowire.Number, typ protowire.Type, s, e int) error {
					if num == 3 { // time_unix_nano; a cumulative start time stays put
						return f.fixed64(typ, s, e)
					}
					return nil
				})
			})
		}
		return nil
	})
}

func (f *patchFinder) logRecord(start, end int) error {
	return eachField(f.buf, start, end, func(num protowire.Number, typ protowire.Type, s, e int) error {
		switch num {
		case 1, 11: // time_unix_nano, observed_time_unix_nano
			return f.fixed64(typ, s, e)
		case 5: // body: a Megatron log line with a fixed-width iteration
			return eachField(f.buf, s, e, func(num protowire.Number, _ protowire.Type, s, e int) error {
				body := f.buf[s:e]
				if num != 1 || !bytes.HasPrefix(body, []byte(" iteration ")) || len(body) < iterationDigitsOffset+iterationDigitsWidth {
					return nil
				}
				digits := body[iterationDigitsOffset : iterationDigitsOffset+iterationDigitsWidth]
				step, err := strconv.Atoi(string(bytes.TrimSpace(digits)))
				if err != nil {
					return fmt.Errorf("log body iteration %q: %w", digits, err)
				}
				f.add(s+iterationDigitsOffset, patchIterDigits, step)
				return nil
			})
		case 6: // attributes
			return f.attribute(s, e)
		case 9: // trace_id
			f.id(s, e, true)
		case 10: // span_id
			f.id(s, e, false)
		}
		return nil
	})
}
